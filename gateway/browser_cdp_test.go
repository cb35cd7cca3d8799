package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// A minimal Chrome DevTools Protocol client for the browser tests: it
// launches Debian's chromium headless, finds the page target and sends
// commands over the target's WebSocket with gorilla/websocket.

// cdpTimeout bounds one CDP command: a hang guard, not a performance
// assertion.
const cdpTimeout = 60 * time.Second

// browserInstallHint is what a test says when chromium is missing: the
// browser test is part of the suite, so a machine without it fails loudly.
const browserInstallHint = "chromium is not installed: run `make deps` " +
	"(.ci/deps installs chromium and python3-websockets with apt-get)"

// browser is a headless chromium the test owns.
type browser struct {
	cmd    *exec.Cmd
	port   int
	stderr *browserLog
}

// startBrowser launches chromium headless on a free DevTools port and kills
// it (and its helper processes) when the test ends. Without chromium it
// fails the test, unless -short.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		if testing.Short() {
			t.Skip("-short: " + browserInstallHint)
		}
		t.Fatal(browserInstallHint)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--no-first-run", "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
		"--remote-debugging-port=0", "--user-data-dir="+dir, "about:blank")
	b := &browser{cmd: cmd, stderr: &browserLog{max: 16 << 10}}
	cmd.Stdout, cmd.Stderr = b.stderr, b.stderr
	// Its own process group, so Cleanup can end the renderer and GPU
	// helpers with the browser.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	eventually(t, "chromium's DevToolsActivePort", func() bool {
		select {
		case <-exited:
			t.Fatalf("chromium exited at start:\n%s", b.stderr)
		default:
		}
		b.port = devToolsPort(filepath.Join(dir, "DevToolsActivePort"))
		return b.port > 0
	})
	return b
}

// devToolsPort reads the port chromium writes on the first line of
// DevToolsActivePort; 0 until the file is complete.
func devToolsPort(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	first, _, complete := strings.Cut(string(b), "\n")
	port, err := strconv.Atoi(strings.TrimSpace(first))
	if !complete || err != nil || port <= 0 || port > 65535 {
		return 0
	}
	return port
}

// page connects to the browser's first page target.
func (b *browser) page(t *testing.T) *cdpPage {
	t.Helper()
	var targets []struct {
		Type  string `json:"type"`
		WSURL string `json:"webSocketDebuggerUrl"`
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/json/list", b.port))
	if err != nil {
		t.Fatalf("DevTools target list: %v", err)
	}
	err = json.NewDecoder(resp.Body).Decode(&targets)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("DevTools target list: %v", err)
	}
	for _, tg := range targets {
		if tg.Type == "page" && tg.WSURL != "" {
			return dialPage(t, tg.WSURL)
		}
	}
	t.Fatalf("no page target among %+v", targets)
	return nil
}

// cdpPage is one DevTools session on a page target: commands go out with
// an id, a reader goroutine hands each response to its caller and keeps
// the console and exception events for the test log.
type cdpPage struct {
	t    *testing.T
	conn *websocket.Conn
	wmu  sync.Mutex

	mu      sync.Mutex
	nextID  int
	waiting map[int]chan cdpReply
	console []string
	done    chan struct{}
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

type cdpIncoming struct {
	ID     int             `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	cdpReply
}

func dialPage(t *testing.T, url string) *cdpPage {
	t.Helper()
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	conn, _, err := d.Dial(url, nil)
	if err != nil {
		t.Fatalf("DevTools connect: %v", err)
	}
	conn.SetReadLimit(64 << 20) // screenshots arrive as one base64 message
	p := &cdpPage{t: t, conn: conn, waiting: map[int]chan cdpReply{}, done: make(chan struct{})}
	go p.readLoop()
	t.Cleanup(func() { conn.Close(); <-p.done })
	p.call("Runtime.enable", nil, nil)
	return p
}

func (p *cdpPage) readLoop() {
	defer close(p.done)
	for {
		var in cdpIncoming
		if err := p.conn.ReadJSON(&in); err != nil {
			return
		}
		p.mu.Lock()
		if ch := p.waiting[in.ID]; in.ID != 0 && ch != nil {
			delete(p.waiting, in.ID)
			ch <- in.cdpReply
		} else if line := cdpConsoleLine(in.Method, in.Params); line != "" && len(p.console) < 200 {
			p.console = append(p.console, line)
		}
		p.mu.Unlock()
	}
}

// cdpConsoleLine renders the page's console messages and uncaught exceptions,
// which explain a dashboard that does not show what the test waits for.
func cdpConsoleLine(method string, params json.RawMessage) string {
	switch method {
	case "Runtime.consoleAPICalled":
		var ev struct {
			Type string `json:"type"`
			Args []struct {
				Value       any    `json:"value"`
				Description string `json:"description"`
			} `json:"args"`
		}
		json.Unmarshal(params, &ev)
		parts := []string{"console." + ev.Type + ":"}
		for _, a := range ev.Args {
			parts = append(parts, fmt.Sprint(a.Value)+a.Description)
		}
		return strings.Join(parts, " ")
	case "Runtime.exceptionThrown":
		return "exception: " + string(params)
	}
	return ""
}

// call sends a command and decodes its result into out (if not nil).
func (p *cdpPage) call(method string, params any, out any) {
	p.t.Helper()
	if err := p.try(method, params, out); err != nil {
		p.t.Fatalf("%s: %v\npage console:\n%s", method, err, p.consoleLog())
	}
}

func (p *cdpPage) try(method string, params any, out any) error {
	ch := make(chan cdpReply, 1)
	p.mu.Lock()
	p.nextID++
	id := p.nextID
	p.waiting[id] = ch
	p.mu.Unlock()
	if params == nil {
		params = struct{}{}
	}
	p.wmu.Lock()
	err := p.conn.WriteJSON(map[string]any{"id": id, "method": method, "params": params})
	p.wmu.Unlock()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), cdpTimeout)
	defer cancel()
	select {
	case r := <-ch:
		if r.Error != nil {
			return fmt.Errorf("cdp error %d: %s", r.Error.Code, r.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(r.Result, out)
		}
		return nil
	case <-p.done:
		return errors.New("DevTools connection closed")
	case <-ctx.Done():
		return errors.New("no answer from chromium")
	}
}

// eval runs a JavaScript expression in the page and decodes its value.
func (p *cdpPage) eval(expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := p.try("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r); err != nil {
		return err
	}
	if r.Exception != nil {
		return fmt.Errorf("page threw: %s", r.Exception.Text)
	}
	if out == nil || len(r.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(r.Result.Value, out)
}

// waitTrue polls a boolean expression until it holds (eventually's limit).
func (p *cdpPage) waitTrue(what, expr string) {
	p.t.Helper()
	var last error
	deadline := time.Now().Add(45 * time.Second)
	for {
		var ok bool
		last = p.eval(expr, &ok)
		if last == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for the page to show %s (last error: %v)\npage console:\n%s",
				what, last, p.consoleLog())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// navigate opens url in a viewport of w x h CSS pixels.
func (p *cdpPage) navigate(url string, w, h int) {
	p.t.Helper()
	p.call("Emulation.setDeviceMetricsOverride", map[string]any{
		"width": w, "height": h, "deviceScaleFactor": 1, "mobile": false,
	}, nil)
	var r struct {
		ErrorText string `json:"errorText"`
	}
	p.call("Page.navigate", map[string]any{"url": url}, &r)
	if r.ErrorText != "" {
		p.t.Fatalf("navigate %s: %s", url, r.ErrorText)
	}
}

// screenshot captures the viewport as PNG.
func (p *cdpPage) screenshot() []byte {
	p.t.Helper()
	var r struct {
		Data string `json:"data"`
	}
	p.call("Page.captureScreenshot", map[string]any{"format": "png"}, &r)
	png, err := base64.StdEncoding.DecodeString(r.Data)
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		p.t.Fatalf("screenshot is not a PNG (%d bytes, %v)", len(png), err)
	}
	return png
}

func (p *cdpPage) consoleLog() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.console, "\n")
}

// browserLog keeps the first max bytes of a child's output.
type browserLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (c *browserLog) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(b[:min(len(b), room)])
	}
	return len(b), nil
}

func (c *browserLog) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}
