// Package firstdevice runs the README's "Your first device" steps exactly
// as the README writes them, so that the page a newcomer follows cannot
// drift from what the gateway does.
//
// The README marks each block the test runs with an HTML comment on the
// line before its fence, `<!-- firstdevice SECTION ROLE [ARG] -->`:
//
//	file NAME   the block is saved as NAME (a config the gateway loads)
//	gateway     the block is the command that starts the gateway; it runs
//	            in the background until the section ends, and the steps
//	            after it wait until /healthz answers
//	background  each line is a command left running (a subscriber)
//	run         the block runs with bash -e; it must exit 0
//	session     an interactive client: the first line is `$ command`, the
//	            `> ` lines are typed into it, each `< ` line must come out
//	            before the next line is typed
//	expect      each line must show up in what the section's commands
//	            printed (word by word, in order; timestamps are not compared)
//
// Two things differ from a newcomer's run, and only these: the port (5020
// in the README is replaced by a free one, in commands and files alike, and
// a gateway started without -c gets a file holding only that listen
// address), and python3 is Debian's /usr/bin/python3, which has the
// websockets package.
package firstdevice

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/edgemux/edgemux/gateway/gatewaytest"
)

const (
	readme   = "../../README.md"
	docPort  = "5020"
	deadline = 60 * time.Second // for anything the test waits on: the machine is shared
)

// step is one marked block of the README.
type step struct {
	section, role, arg string
	text               string
	line               int
}

var marker = regexp.MustCompile(`^<!-- firstdevice (\S+) (\S+)(?: (\S+))? -->$`)

// readSteps reads the marked blocks, in README order.
func readSteps(t *testing.T) []step {
	t.Helper()
	data, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var steps []step
	for i := 0; i < len(lines); i++ {
		m := marker.FindStringSubmatch(strings.TrimSpace(lines[i]))
		if m == nil {
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			t.Fatalf("README.md:%d: the marker is not followed by a fenced block", i+1)
		}
		var body []string
		j := i + 2
		for ; j < len(lines) && lines[j] != "```"; j++ {
			body = append(body, lines[j])
		}
		steps = append(steps, step{section: m[1], role: m[2], arg: m[3], text: strings.Join(body, "\n"), line: i + 1})
		i = j
	}
	return steps
}

// TestFirstDevice runs each section of the README's "Your first device".
func TestFirstDevice(t *testing.T) {
	steps := readSteps(t)
	var order []string
	bySection := map[string][]step{}
	for _, s := range steps {
		if _, ok := bySection[s.section]; !ok {
			order = append(order, s.section)
		}
		bySection[s.section] = append(bySection[s.section], s)
	}
	for _, want := range []string{"websocket", "modbus", "private"} {
		if _, ok := bySection[want]; !ok {
			t.Fatalf("README.md has no first-device steps for %s (sections: %v)", want, order)
		}
	}
	bin := buildGateway(t)
	for _, name := range order {
		t.Run(name, func(t *testing.T) { runSection(t, bin, bySection[name]) })
	}
}

// buildGateway builds the binary the README's `make build` makes.
func buildGateway(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "edgemux"), "github.com/edgemux/edgemux/gateway/cmd/edgemux").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// section is one section's run: its directory, its processes and all they print.
type section struct {
	t    *testing.T
	dir  string
	port string
	env  []string
	out  syncBuffer
	bg   []background
}

// background is a process left running, and its end.
type background struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

func runSection(t *testing.T, binDir string, steps []step) {
	s := &section{t: t, dir: t.TempDir(), port: freePort(t)}
	if err := os.Symlink(binDir, filepath.Join(s.dir, "bin")); err != nil {
		t.Fatal(err)
	}
	tools := t.TempDir()
	if err := os.Symlink("/usr/bin/python3", filepath.Join(tools, "python3")); err != nil {
		t.Fatal(err)
	}
	s.env = append(os.Environ(), "PATH="+tools+":"+os.Getenv("PATH"))
	t.Cleanup(s.stopAll)
	requireTools(t, steps)
	for _, st := range steps {
		st.text = strings.ReplaceAll(st.text, docPort, s.port)
		switch st.role {
		case "file":
			s.writeFile(st.arg, st.text)
		case "gateway":
			s.startGateway(st)
		case "background":
			for _, line := range nonEmpty(st.text) {
				s.start(line)
			}
		case "run":
			s.run(st)
		case "session":
			s.session(st)
		case "expect":
			for _, line := range nonEmpty(st.text) {
				s.waitFor(st, line)
			}
		default:
			t.Fatalf("README.md:%d: unknown role %q", st.line, st.role)
		}
	}
	if t.Failed() {
		t.Logf("what the section printed:\n%s", s.out.String())
	}
}

// requireTools fails the section at once, with the fix, when a client its
// steps use is not installed, rather than after a long wait.
func requireTools(t *testing.T, steps []step) {
	t.Helper()
	const hint = "run `make deps` (.ci/deps installs the test tools with apt-get)"
	for _, st := range steps {
		if strings.Contains(st.text, "python3 -m websockets") {
			if err := exec.Command("/usr/bin/python3", "-c", "import websockets").Run(); err != nil {
				t.Fatalf("README.md:%d needs python3-websockets for /usr/bin/python3: %s", st.line, hint)
			}
		}
		for _, tool := range []string{"mbpoll", "coap-client-notls"} {
			if strings.Contains(st.text, tool+" ") {
				if _, err := exec.LookPath(tool); err != nil {
					t.Fatalf("README.md:%d needs %s: %s", st.line, tool, hint)
				}
			}
		}
	}
}

func (s *section) writeFile(name, text string) {
	if err := os.WriteFile(filepath.Join(s.dir, name), []byte(text+"\n"), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// startGateway starts the block's one command on this section's port and
// waits until it answers /healthz.
func (s *section) startGateway(st step) {
	cmd := strings.TrimSpace(st.text)
	if f := regexp.MustCompile(`-c (\S+)`).FindStringSubmatch(cmd); f != nil {
		path := filepath.Join(s.dir, f[1])
		data, err := os.ReadFile(path)
		if err != nil {
			s.t.Fatalf("README.md:%d: %v", st.line, err)
		}
		if !regexp.MustCompile(`(?m)^listen:`).Match(data) {
			s.writeFile(f[1], "listen: 127.0.0.1:"+s.port+"\n"+string(data))
		}
	} else {
		s.writeFile("listen.yaml", "listen: 127.0.0.1:"+s.port)
		cmd += " -c listen.yaml"
	}
	s.start(cmd)
	url := "http://127.0.0.1:" + s.port + "/healthz"
	s.poll("the gateway's /healthz", func() bool {
		r, err := http.Get(url)
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	})
}

// start runs a command in the background, in its own process group.
func (s *section) start(line string) *exec.Cmd {
	cmd := exec.Command("bash", "-c", "exec "+line)
	cmd.Dir, cmd.Env = s.dir, s.env
	cmd.Stdout, cmd.Stderr = &s.out, &s.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("%s: %v", line, err)
	}
	s.keep(cmd)
	return cmd
}

// keep reaps a background process when it ends.
func (s *section) keep(cmd *exec.Cmd) {
	b := background{cmd, make(chan struct{})}
	go func() { cmd.Wait(); close(b.exited) }() //nolint:errcheck // its output is what the test checks
	s.bg = append(s.bg, b)
}

// stopAll ends what the section left running, as Ctrl-C would, and waits
// for it: the gateway drains and exits.
func (s *section) stopAll() {
	for _, b := range s.bg {
		syscall.Kill(-b.cmd.Process.Pid, syscall.SIGINT)
	}
	for _, b := range s.bg {
		select {
		case <-b.exited:
		case <-time.After(deadline):
			syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
			s.t.Errorf("%s did not stop within %v of SIGINT", b.cmd.Args, deadline)
		}
	}
}

// run runs a block with bash -e and fails the test when it fails.
func (s *section) run(st step) {
	cmd := exec.Command("bash", "-e", "-c", st.text)
	cmd.Dir, cmd.Env = s.dir, s.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, &s.out), io.MultiWriter(&out, &s.out)
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			s.t.Fatalf("README.md:%d: the block failed (%v):\n%s\n--- output ---\n%s", st.line, err, st.text, out.String())
		}
	case <-time.After(deadline):
		cmd.Process.Kill()
		s.t.Fatalf("README.md:%d: the block did not finish in %v:\n%s", st.line, deadline, st.text)
	}
}

// session types the `> ` lines into an interactive client and waits for
// each `< ` line before typing on.
func (s *section) session(st step) {
	lines := nonEmpty(st.text)
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "$ ") {
		s.t.Fatalf("README.md:%d: a session starts with `$ command`", st.line)
	}
	cmd := exec.Command("bash", "-c", "exec "+strings.TrimPrefix(lines[0], "$ "))
	cmd.Dir, cmd.Env = s.dir, s.env
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = io.MultiWriter(&out, &s.out), io.MultiWriter(&out, &s.out)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		s.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.keep(cmd)
	// Lines typed before the client is connected are lost (python3 -m
	// websockets reads them early), as they would be for a person.
	s.poll("the client to connect", func() bool { return strings.Contains(out.String(), "Connected to") })
	for _, l := range lines[1:] {
		switch {
		case strings.HasPrefix(l, "> "):
			if _, err := io.WriteString(stdin, strings.TrimPrefix(l, "> ")+"\n"); err != nil {
				s.t.Fatalf("README.md:%d: typing %q: %v", st.line, l, err)
			}
		case strings.HasPrefix(l, "< "):
			s.poll(fmt.Sprintf("README.md:%d: %q from the client", st.line, l), func() bool { return printed(out.String(), l) })
		default:
			s.t.Fatalf("README.md:%d: a session line starts with `> ` or `< `: %q", st.line, l)
		}
	}
	stdin.Close()
}

func (s *section) waitFor(st step, line string) {
	s.poll(fmt.Sprintf("README.md:%d: %q in the output", st.line, line), func() bool { return printed(s.out.String(), line) })
}

// poll waits until cond holds, failing the test at the deadline.
func (s *section) poll(what string, cond func() bool) {
	s.t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			s.t.Fatalf("waited %v for %s; the section printed:\n%s", deadline, what, s.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var (
	ansi      = regexp.MustCompile("\x1b(\\[[0-9;?]*[A-Za-z]|[78])")
	isoTime   = regexp.MustCompile(`\d{4}-\d\d-\d\dT[0-9:.]+(Z|[+-]\d\d:\d\d)`)
	unixStamp = regexp.MustCompile(`\d{10,}`)
)

// normalize takes out what differs from run to run: terminal control
// sequences, and times.
func normalize(s string) string {
	s = ansi.ReplaceAllString(s, "")
	s = isoTime.ReplaceAllString(s, "TIME")
	return unixStamp.ReplaceAllString(s, "STAMP")
}

// printed says whether some line of out holds want's words in order.
func printed(out, want string) bool {
	words := strings.Fields(normalize(want))
	sc := bufio.NewScanner(strings.NewReader(strings.ReplaceAll(normalize(out), "\r", "\n")))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		got, i := strings.Fields(sc.Text()), 0
		for _, g := range got {
			if i < len(words) && g == words[i] {
				i++
			}
		}
		if i == len(words) {
			return true
		}
	}
	return false
}

func nonEmpty(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// freePort is a port free for TCP and UDP on 127.0.0.1 (the gateway takes
// both).
func freePort(t *testing.T) string {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", "127.0.0.1:"+strconv.Itoa(port))
		l.Close()
		if err == nil {
			u.Close()
			return strconv.Itoa(port)
		}
	}
	t.Fatal("no port free for both TCP and UDP")
	return ""
}

// syncBuffer is a buffer that several processes write to.
type syncBuffer = gatewaytest.Buffer
