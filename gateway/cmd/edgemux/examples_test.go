package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/edgemux/edgemux/protocols/private"
)

// TestExampleConfigsCheck runs `edgemux check` over every example config,
// from the repository's top directory (where their token paths start):
// each must be ok with no warning, as the README and the files promise.
func TestExampleConfigsCheck(t *testing.T) {
	t.Chdir("../../..")
	var files []string
	for _, pattern := range []string{"examples/*.yaml", "examples/configs/*.yaml"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, want := range []string{
		"examples/edgemux.yaml",
		"examples/configs/modbus-live-tags.yaml",
		"examples/configs/modbus-upstream.yaml",
		"examples/configs/forward.yaml",
		"examples/configs/admin-locked.yaml",
		"examples/configs/north-mqtt.yaml",
		"examples/configs/north-nats.yaml",
	} {
		if !slices.Contains(files, want) {
			t.Errorf("%s is not among the example configs found: %q", want, files)
		}
	}
	for _, file := range files {
		var out, errOut bytes.Buffer
		code := run([]string{"check", "-c", file}, &out, &errOut)
		if code != 0 || out.String() != file+": ok\n" || errOut.Len() != 0 {
			t.Errorf("edgemux check -c %s: exit %d\n%s%s", file, code, out.String(), errOut.String())
		}
	}
}

// TestModbusLiveTagsExample runs the gateway on the Modbus example (on a
// free loopback port): a value a device publishes over the private
// protocol is what a Modbus master reads, scaled as the map says, and a
// tag nobody published answers exception 0x0B, not 0.
func TestModbusLiveTagsExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	example, err := os.ReadFile("../../../examples/configs/modbus-live-tags.yaml")
	if err != nil {
		t.Fatal(err)
	}
	listen := regexp.MustCompile(`(?m)^listen: .*$`)
	if !listen.Match(example) {
		t.Fatal("the example has no listen line to move to a free port")
	}
	cfgFile := filepath.Join(t.TempDir(), "modbus.yaml")
	os.WriteFile(cfgFile, listen.ReplaceAll(example, []byte("listen: 127.0.0.1:0\nloops: 1")), 0o644)
	addr := startBinary(t, cfgFile)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dev, err := private.Dial(ctx, addr, "example-sensor", private.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if err := dev.Publish("plant/line1/temp", []byte("21.7"), true); err != nil {
		t.Fatal(err)
	}
	master, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer master.Close()
	master.SetDeadline(time.Now().Add(30 * time.Second))
	// The publish and the read travel on different connections: poll
	// until the value is there (a missing value reads as 0x0B meanwhile).
	for {
		resp := readInputRegisters(t, master, 0, 1)
		if bytes.Equal(resp, []byte{0x04, 0x02, 0x00, 217}) { // 21.7 x 10
			break
		}
		if !bytes.Equal(resp, []byte{0x84, 0x0B}) {
			t.Fatalf("read of plant/line1/temp: PDU % x, want 04 02 00 d9 (217)", resp)
		}
		if ctx.Err() != nil {
			t.Fatal("the published value never reached the register map")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if resp := readInputRegisters(t, master, 1, 1); !bytes.Equal(resp, []byte{0x84, 0x0B}) {
		t.Errorf("read of a tag never published: PDU % x, want exception 84 0b", resp)
	}
}

// readInputRegisters sends a Modbus TCP read (function 4, unit 1) and
// returns the response PDU.
func readInputRegisters(t *testing.T, c net.Conn, addr, count uint16) []byte {
	t.Helper()
	req := []byte{0, 1, 0, 0, 0, 6, 1, 4, byte(addr >> 8), byte(addr), byte(count >> 8), byte(count)}
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 7)
	if _, err := io.ReadFull(c, head); err != nil {
		t.Fatal(err)
	}
	pdu := make([]byte, (int(head[4])<<8|int(head[5]))-1) // the length counts the unit id
	if _, err := io.ReadFull(c, pdu); err != nil {
		t.Fatal(err)
	}
	return pdu
}

// startBinary runs edgemux on cfgFile (which listens on a free loopback
// port) and returns the address it serves.
func startBinary(t *testing.T, cfgFile string) string {
	t.Helper()
	addrRE := regexp.MustCompile(`addr=(127\.0\.0\.1:\d+)`)
	timeout := time.After(30 * time.Second)
	logs := runBinary(t, cfgFile)
	for {
		select {
		case l, ok := <-logs:
			if !ok {
				t.Fatal("the log ended before a listening line")
			}
			if m := addrRE.FindStringSubmatch(l); m != nil {
				return m[1]
			}
		case <-timeout:
			t.Fatal("no listening line in the log")
		}
	}
}

// runBinary builds edgemux, runs it on cfgFile and returns its log lines;
// the process is killed when the test ends.
func runBinary(t *testing.T, cfgFile string) <-chan string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "edgemux")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	_, logs := spawn(t, bin, "run", "-c", cfgFile)
	return logs
}
