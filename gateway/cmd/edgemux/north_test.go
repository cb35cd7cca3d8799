package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/private"
	"github.com/edgemux/edgemux/route/north/northtest"
	"github.com/edgemux/edgemux/route/routetest"
)

// TestNorthSurvivesSIGKILL: edgemux (the binary, config from a temp file)
// with its broker down queues what devices publish on disk; it is killed
// with SIGKILL; the broker and then edgemux start again, and every
// message reaches a subscriber, the first arrivals in order. Killed once
// more, its broker publishes the will.
func TestNorthSurvivesSIGKILL(t *testing.T) {
	const n = 2000
	bin := buildBinary(t)
	br := northtest.StartMosquitto(t)
	br.Stop() // down while the messages come
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "north.yaml")
	os.WriteFile(cfgFile, []byte(fmt.Sprintf(`listen: 127.0.0.1:0
loops: 1
data_dir: %s
north:
  sinks:
    - name: up
      kind: mqtt
      url: %s
      will: {topic: gw/state, qos: 1, retain: true}
      map: [{from: "s/#", to: "out/{topic}", qos: 1}]
      store: {enabled: true, sync: always}
`, dir, br.URL())), 0o644)

	gw, addr := startEdgemux(t, bin, cfgFile)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dev, err := private.Dial(ctx, addr, "sensor", private.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := dev.Publish("s/"+strconv.Itoa(i%50), []byte("n="+strconv.Itoa(i)), true); err != nil {
			t.Fatal(err)
		}
	}
	dev.Close()
	routetest.Eventually(t, "every message on disk", func() bool {
		return strings.Contains(scrape(t, addr), `edgemux_north_queue_records{sink="up"} `+strconv.Itoa(n)+"\n")
	})
	gw.Process.Kill() // SIGKILL: no goodbye, no sync but what sync: always did
	gw.Wait()

	br.Start()
	sub := northtest.Connect(t, br.URL(), "cloud", "out/#")
	state := northtest.Connect(t, br.URL(), "watch", "gw/#")
	gw, _ = startEdgemux(t, bin, cfgFile)
	routetest.Eventually(t, "every message after the restart", func() bool { return distinct(sub) == n })
	seen, last := map[string]bool{}, -1
	for _, m := range sub.Messages() {
		p := string(m.Payload())
		if seen[p] {
			continue
		}
		seen[p] = true
		i, _ := strconv.Atoi(strings.TrimPrefix(p, "n="))
		if i < last {
			t.Fatalf("message %d arrived after %d: the queue is FIFO", i, last)
		}
		last = i
	}
	t.Logf("%d messages, %d arrivals (duplicates are QoS 1 resends)", n, len(sub.Messages()))

	gw.Process.Kill()
	gw.Wait()
	routetest.Eventually(t, "the will", func() bool {
		ms := state.Messages()
		return len(ms) > 0 && string(ms[len(ms)-1].Payload()) == "offline"
	})
}

func distinct(c *northtest.Client) int {
	seen := map[string]bool{}
	for _, m := range c.Messages() {
		seen[string(m.Payload())] = true
	}
	return len(seen)
}

// startEdgemux runs bin on cfgFile and returns the process and the
// address it serves once it logs it; the process is killed at the end.
func startEdgemux(t *testing.T, bin, cfgFile string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(bin, "run", "-c", cfgFile)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addrRE := regexp.MustCompile(`addr=(127\.0\.0\.1:\d+)`)
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if m := addrRE.FindStringSubmatch(lines.Text()); m != nil {
			go io.Copy(io.Discard, stderr) // keep the pipe flowing
			return cmd, m[1]
		}
	}
	t.Fatal("edgemux ended before logging its address")
	return nil, ""
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
