package main

// The command-line client: pub, sub and get speak the private protocol
// (protocols/private) to a running gateway, as a device would, so that a
// script or a newcomer can put a value on the bus and read it back
// without writing any framing. Exit codes (docs/CLI.md):
//
//	0 ok
//	1 the gateway answered with an error (a refused PUB or SUB, no value)
//	2 usage: a bad flag, a missing -t, a filter where a topic belongs
//	3 cannot connect: no gateway at -s, or it did not say HELLO back
//	4 timed out: sub -W passed before -C messages, or no answer in time

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/protocols/private"
)

// Exit codes of the client commands.
const (
	exitOK       = 0
	exitRefused  = 1
	exitUsage    = 2
	exitNoServer = 3
	exitTimeout  = 4
)

// defaultServer is where the client looks for the gateway: the default
// config's listen address.
var defaultServer = mustDefaultListen()

func mustDefaultListen() string {
	cfg, err := config.Parse(config.DefaultYAML)
	if err != nil {
		panic(err)
	}
	return cfg.Listen
}

// clientFlags are the flags every client command has.
type clientFlags struct {
	server  string
	topic   string
	id      string
	timeout time.Duration
}

func (f *clientFlags) register(fs *flag.FlagSet, topicHelp string) {
	fs.StringVar(&f.server, "s", defaultServer, "gateway address host:port")
	fs.StringVar(&f.topic, "t", "", topicHelp)
	fs.StringVar(&f.id, "i", "", "device id sent in HELLO (default edgemux-cli-<pid>)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait to connect and for each answer")
}

// dial connects as a device; a failure is reported and mapped to an exit
// code, 0 meaning the client is up.
func (f *clientFlags) dial(stderr io.Writer) (*private.Client, int) {
	id := f.id
	if id == "" {
		id = "edgemux-cli-" + strconv.Itoa(os.Getpid())
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	c, err := private.Dial(ctx, f.server, id, private.ClientOptions{Timeout: f.timeout})
	if err != nil {
		var code private.Code
		if errors.As(err, &code) { // the gateway answered the HELLO with an error
			fmt.Fprintf(stderr, "edgemux: %s refused the connection: %v\n", f.server, err)
			return nil, exitRefused
		}
		fmt.Fprintf(stderr, "edgemux: cannot connect to %s: %v\n", f.server, err)
		return nil, exitNoServer
	}
	return c, exitOK
}

// answerCode maps a failed request to an exit code.
func answerCode(stderr io.Writer, what string, err error) int {
	fmt.Fprintf(stderr, "edgemux: %s: %v\n", what, err)
	if errors.Is(err, private.ErrNoAnswer) || errors.Is(err, context.DeadlineExceeded) {
		return exitTimeout
	}
	return exitRefused
}

// needTopic checks -t: present, and a topic rather than a filter when
// exact is set.
func needTopic(stderr io.Writer, cmd, topic string, exact bool) bool {
	switch {
	case topic == "":
		fmt.Fprintf(stderr, "edgemux %s: -t is required (see edgemux help %s)\n", cmd, cmd)
		return false
	case exact && strings.ContainsAny(topic, "+#"):
		fmt.Fprintf(stderr, "edgemux %s: -t %q: a topic, not a filter (+ and # are for sub)\n", cmd, topic)
		return false
	}
	return true
}

// pubCommand: edgemux pub -t TOPIC -m VALUE.
func pubCommand(fs *flag.FlagSet, e env) func() int {
	var f clientFlags
	f.register(fs, "topic to publish to (required), e.g. plant/line1/temp")
	msg := fs.String("m", "", "the value to publish")
	stdin := fs.Bool("stdin", false, "publish each line of standard input as one message")
	return func() int {
		if !needTopic(e.stderr, "pub", f.topic, true) {
			return exitUsage
		}
		if !isSet(fs, "m") && !*stdin {
			return usageError(e.stderr, "pub", "-m VALUE or -stdin is required")
		}
		c, code := f.dial(e.stderr)
		if code != exitOK {
			return code
		}
		defer c.Close()
		if !*stdin {
			if err := c.Publish(f.topic, []byte(*msg), true); err != nil {
				return answerCode(e.stderr, "pub "+f.topic, err)
			}
			return exitOK
		}
		return pubLines(c, f.topic, e)
	}
}

// pubLines publishes every line of stdin, each acknowledged before the
// next goes out, so the exit code covers them all.
func pubLines(c *private.Client, topic string, e env) int {
	lines := bufio.NewScanner(e.stdin)
	lines.Buffer(nil, private.DefaultMaxFrame)
	for lines.Scan() {
		if err := c.Publish(topic, []byte(strings.TrimSuffix(lines.Text(), "\r")), true); err != nil {
			return answerCode(e.stderr, "pub "+topic, err)
		}
	}
	if err := lines.Err(); err != nil {
		fmt.Fprintln(e.stderr, "edgemux pub: stdin:", err)
		return exitRefused
	}
	return exitOK
}

// subCommand: edgemux sub -t FILTER [-C n] [-W d] [-json].
func subCommand(fs *flag.FlagSet, e env) func() int {
	var f clientFlags
	var filters []string
	fs.Func("t", "topic filter to subscribe to (required; repeat for more), MQTT wildcards + and #", func(s string) error {
		filters = append(filters, s)
		return nil
	})
	fs.StringVar(&f.server, "s", defaultServer, "gateway address host:port")
	fs.StringVar(&f.id, "i", "", "device id sent in HELLO (default edgemux-cli-<pid>)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait to connect and for each answer")
	count := fs.Int("C", 0, "exit 0 after this many messages (0: run until interrupted)")
	wait := fs.Duration("W", 0, "exit 4 if -C messages have not come within this time (0: wait for ever)")
	asJSON := fs.Bool("json", false, "print one JSON object per message instead of a line of text")
	noRetained := fs.Bool("R", false, "skip the retained (last) values replayed on subscribe; print live messages only")
	return func() int {
		if len(filters) == 0 {
			return usageError(e.stderr, "sub", "-t is required")
		}
		if *count < 0 || *wait < 0 {
			return usageError(e.stderr, "sub", "-C and -W must not be negative")
		}
		c, code := f.dial(e.stderr)
		if code != exitOK {
			return code
		}
		defer c.Close()
		for _, filter := range filters {
			if err := c.Subscribe(filter); err != nil {
				return answerCode(e.stderr, "sub "+filter, err)
			}
		}
		p := printer{w: e.stdout, json: *asJSON}
		return receive(c, p, *count, *wait, *noRetained, e.stderr)
	}
}

// receive prints deliveries until count of them, the -W deadline, an
// interrupt, or the connection's end.
func receive(c *private.Client, p printer, count int, wait time.Duration, noRetained bool, stderr io.Writer) int {
	var deadline <-chan time.Time
	if wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		deadline = t.C
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	got := 0
	for {
		select {
		case d, ok := <-c.Messages():
			if !ok {
				fmt.Fprintln(stderr, "edgemux sub: connection ended:", c.Err())
				return exitNoServer
			}
			if noRetained && d.Retained {
				continue
			}
			if err := p.print(d); err != nil {
				return exitRefused // stdout closed (a pipe whose reader left)
			}
			if got++; count > 0 && got == count {
				return exitOK
			}
		case <-deadline:
			if count > 0 {
				fmt.Fprintf(stderr, "edgemux sub: %d of %d messages within %v\n", got, count, wait)
			} else {
				fmt.Fprintf(stderr, "edgemux sub: -W %v passed, %d messages\n", wait, got)
			}
			return exitTimeout
		case <-sigs:
			return exitOK
		}
	}
}

// getCommand: edgemux get -t TOPIC prints the topic's last value.
func getCommand(fs *flag.FlagSet, e env) func() int {
	var f clientFlags
	f.register(fs, "topic to read (required): a topic, not a filter")
	asJSON := fs.Bool("json", false, "print a JSON object (topic, value, source, time) instead of the bare value")
	return func() int {
		if !needTopic(e.stderr, "get", f.topic, true) {
			return exitUsage
		}
		c, code := f.dial(e.stderr)
		if code != exitOK {
			return code
		}
		defer c.Close()
		d, err := lastValue(c, f.topic, f.timeout)
		if err != nil {
			return answerCode(e.stderr, "get "+f.topic, err)
		}
		if *asJSON {
			return printOrFail(printer{w: e.stdout, json: true}.print(d))
		}
		_, err = fmt.Fprintf(e.stdout, "%s\n", d.Data)
		return printOrFail(err)
	}
}

// errNoValue is get's answer for a topic the gateway holds no value of.
var errNoValue = errors.New("no value: the gateway holds no last value for this topic")

// lastValue reads topic's last value: SUB, wait for the ACK, then PING.
// The gateway writes a subscription's first replay batch before it reads
// the connection's next request (SPEC.md 2.2, "Reading a last value"), so
// a PONG with no delivery before it means there is no value.
func lastValue(c *private.Client, topic string, timeout time.Duration) (private.Delivery, error) {
	if err := c.Subscribe(topic); err != nil {
		return private.Delivery{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := c.Ping(ctx); err != nil {
		return private.Delivery{}, err
	}
	// The reader put every delivery that preceded the PONG on Messages
	// before it saw the PONG; the last one of topic is its newest value.
	d, ok := newestQueued(c.Messages(), topic)
	if !ok {
		return private.Delivery{}, errNoValue
	}
	return d, nil
}

// newestQueued takes what msgs holds now and returns the last delivery
// of topic among it.
func newestQueued(msgs <-chan private.Delivery, topic string) (last private.Delivery, found bool) {
	for {
		select {
		case d, open := <-msgs:
			if !open {
				return last, found
			}
			if d.Topic == topic {
				last, found = d, true
			}
		default:
			return last, found
		}
	}
}

func usageError(stderr io.Writer, cmd, msg string) int {
	fmt.Fprintf(stderr, "edgemux %s: %s (see edgemux help %s)\n", cmd, msg, cmd)
	return exitUsage
}

// isSet reports whether the command line set flag name.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func printOrFail(err error) int {
	if err != nil {
		return exitRefused
	}
	return exitOK
}

// printer writes deliveries, one line each: "topic value source time" as
// text, or a JSON object.
type printer struct {
	w    io.Writer
	json bool
}

// jsonMessage is one delivery as sub -json and get -json print it. A
// value that is not UTF-8 text goes in value_base64 instead of value.
type jsonMessage struct {
	Topic       string `json:"topic"`
	Value       string `json:"value,omitempty"`
	ValueBase64 string `json:"value_base64,omitempty"`
	Source      string `json:"source"`
	Time        string `json:"time"`
	Retained    bool   `json:"retained"`
}

func (p printer) print(d private.Delivery) error {
	ts := d.TS.UTC().Format(time.RFC3339Nano)
	if !p.json {
		_, err := fmt.Fprintf(p.w, "%s %s %s %s\n", d.Topic, textValue(d.Data), d.Src, ts)
		return err
	}
	m := jsonMessage{Topic: d.Topic, Source: d.Src, Time: ts, Retained: d.Retained}
	if utf8.Valid(d.Data) {
		m.Value = string(d.Data)
	} else {
		m.ValueBase64 = base64.StdEncoding.EncodeToString(d.Data)
	}
	line, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = p.w.Write(append(line, '\n'))
	return err
}

// textValue keeps a line one line with four fields: a value that is
// empty, holds a space or a control character, or is not UTF-8 is
// printed Go-quoted.
func textValue(b []byte) string {
	s := string(b)
	if s == "" || !utf8.ValidString(s) || strings.IndexFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || !unicode.IsPrint(r) || r == '"'
	}) >= 0 {
		return strconv.Quote(s)
	}
	return s
}
