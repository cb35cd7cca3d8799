package rudp

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const goodKey = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

// keyFileCases is ParseKeys' table; FuzzParseKeys is seeded from it.
var keyFileCases = []struct {
	name, in string
	devices  int
	errLines []string
}{
	{"two devices", "# plant 3\ndev-1 " + goodKey + "\n\n  dev-2\t" + strings.ToUpper(goodKey) + "  \n", 2, nil},
	{"empty", "", 0, nil},
	{"short key", "dev-1 0011\n", 0, []string{"line 1"}},
	{"not hex", "dev-1 " + strings.Repeat("zz", 32) + "\n", 0, []string{"line 1"}},
	{"three fields", "dev-1 " + goodKey + " extra\n", 0, []string{"line 1"}},
	{"duplicate", "a " + goodKey + "\nb " + goodKey + "\na " + goodKey + "\n", 0, []string{"line 3"}},
	{"every bad line", "x 1\n# ok\ny " + goodKey + "\nz\n", 0, []string{"line 1", "line 4"}},
	{"long id", strings.Repeat("d", 129) + " " + goodKey, 0, []string{"line 1"}},
}

func TestParseKeys(t *testing.T) {
	for _, tc := range keyFileCases {
		keys, err := ParseKeys(strings.NewReader(tc.in))
		if tc.errLines == nil {
			if err != nil || len(keys) != tc.devices {
				t.Errorf("%s: %d keys, %v", tc.name, len(keys), err)
			}
			continue
		}
		if !errors.Is(err, ErrKeyFile) {
			t.Errorf("%s: %v, want ErrKeyFile", tc.name, err)
			continue
		}
		for _, l := range tc.errLines {
			if !strings.Contains(err.Error(), l+":") {
				t.Errorf("%s: %q does not name %s", tc.name, err, l)
			}
		}
	}
}

func TestLoadKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(path, []byte("dev-1 "+goodKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := LoadKeys(path)
	if err != nil || len(keys["dev-1"]) != 32 || keys["dev-1"][31] != 0x1f {
		t.Fatalf("%v, %v", keys, err)
	}
	if _, err := LoadKeys(path + ".missing"); !errors.Is(err, ErrKeyFile) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if err := (Config{Keys: keys}).WithDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
}

func FuzzParseKeys(f *testing.F) {
	for _, tc := range keyFileCases {
		f.Add(tc.in)
	}
	f.Fuzz(func(t *testing.T, in string) {
		keys, err := ParseKeys(strings.NewReader(in))
		if err != nil {
			return
		}
		for id, k := range keys {
			if len(k) != 32 || id == "" || len(id) > MaxDeviceID {
				t.Fatalf("accepted %q -> %x", id, k)
			}
		}
	})
}
