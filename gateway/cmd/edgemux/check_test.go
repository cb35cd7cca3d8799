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
dispatch.policy: must be one of inline | roundrobin | entropy, not "fastest" (line 9)
modbus.tags[2].tpoic: unknown key; did you mean modbus.tags[2].topic? (line 14)
`
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("check: code %d, stdout %q, stderr:\n%s\nwant code 1, stderr:\n%s", code, stdout, stderr, want)
	}
}
