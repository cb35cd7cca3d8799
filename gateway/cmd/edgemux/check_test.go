package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// checkFile runs `edgemux check -c` on a file holding doc and returns
// the exit code, stdout and stderr.
func checkFile(t *testing.T, doc string) (code int, path, stdout, stderr string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "edgemux.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code = run([]string{"check", "-c", path}, &out, &errOut)
	return code, path, out.String(), errOut.String()
}

// TestCheckReportsEverything: a typo, a wrong type and a refused value
// come out at once, in file order, each with its key path, its line and
// what is expected; no Go type names.
func TestCheckReportsEverything(t *testing.T) {
	code, path, stdout, stderr := checkFile(t, `listen: 127.0.0.1:5020
limits:
  max_conns: lots
sniff:
  budget: 512
  buget: 256
  deadline: 3sec
dispatch:
  policy: fastest
modbus:
  tags:
    - {topic: plant/a, table: input, address: 0, type: int16}
    - {topic: plant/b, table: input, address: 1, type: int16}
    - tpoic: plant/c
      topic: plant/c
      table: input
      address: 2
      type: int16
`)
	want := path + `: invalid configuration:
limits.max_conns: "lots" is not a whole number (line 3)
sniff.buget: unknown key; did you mean sniff.budget? (line 6)
sniff.deadline: "3sec" is not a duration (e.g. 500ms, 3s) (line 7)
dispatch.policy: must be one of inline | roundrobin | entropy | leastconns, not "fastest" (line 9)
modbus.tags[2].tpoic: unknown key; did you mean modbus.tags[2].topic? (line 14)
`
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("check: code %d, stdout %q, stderr:\n%s\nwant code 1, stderr:\n%s", code, stdout, stderr, want)
	}
}

// routesWithoutWebSocket replaces the default routes and leaves the
// WebSocket out: it loads, and check says what it turns off.
const routesWithoutWebSocket = `listen: 127.0.0.1:0
loops: 1
routes:
  - {match: {proto: private}, action: handle}
  - {match: {proto: modbus}, action: handle}
  - {match: {proto: coap}, action: handle}
  - {match: {proto: http}, action: admin}
  - {match: {proto: "*"}, action: quarantine}
`

// TestCheckWarns: a config that loads but turns a protocol off is ok,
// exit 0, with the warning naming the key, the line and the fix.
func TestCheckWarns(t *testing.T) {
	code, path, stdout, stderr := checkFile(t, routesWithoutWebSocket)
	want := path + `: ok
warning: routes: no route for proto websocket: WebSocket upgrades are taken for plain HTTP, so /ws and the dashboard's live feed answer 404; add - {match: {proto: websocket}, action: handle} to routes before the http route, or - {match: {proto: websocket}, action: quarantine} to turn it off on purpose (line 3)
`
	if code != 0 || stdout != want || stderr != "" {
		t.Errorf("check: code %d, stderr %q, stdout:\n%s\nwant code 0, stdout:\n%s", code, stderr, stdout, want)
	}
}

// TestStartupWarns: the gateway starts with such a config, and its log
// says the same as check.
func TestStartupWarns(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	cfgFile := filepath.Join(t.TempDir(), "edgemux.yaml")
	os.WriteFile(cfgFile, []byte(routesWithoutWebSocket), 0o644)
	logs := runBinary(t, cfgFile)
	waitLog(t, logs, `level=WARN msg=config key=routes line=3 warning="no route for proto websocket: WebSocket upgrades are taken for plain HTTP, so /ws`)
	waitLog(t, logs, "addr=127.0.0.1:") // and it serves
}
