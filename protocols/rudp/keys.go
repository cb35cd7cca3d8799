package rudp

import (
	"bufio"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"
)

// ErrKeyFile is wrapped by every error of a key file.
var ErrKeyFile = errors.New("rudp: key file")

// MaxKeys bounds the devices of one key file.
const MaxKeys = 1 << 20

// LoadKeys reads a key file: one device per line, its id, white space,
// and its 32-byte key as 64 hex digits; blank lines and lines starting
// with # are skipped. Every bad line is reported with its number.
func LoadKeys(path string) (Keys, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKeyFile, err)
	}
	defer f.Close()
	keys, err := ParseKeys(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return keys, nil
}

// ParseKeys reads a key file's content (see LoadKeys).
func ParseKeys(r io.Reader) (Keys, error) {
	keys := Keys{}
	var errs []error
	bad := func(line int, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: line %d: "+format, append([]any{ErrKeyFile, line}, args...)...))
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 4096)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 2 {
			bad(line, "want a device id and a key, got %d fields", len(fields))
			continue
		}
		id, hexKey := fields[0], fields[1]
		if len(id) > MaxDeviceID || strings.IndexFunc(id, unicode.IsControl) >= 0 {
			bad(line, "device id longer than %d bytes or with control characters", MaxDeviceID)
			continue
		}
		key, err := hex.DecodeString(hexKey)
		if err != nil || len(key) != 32 {
			bad(line, "device %q: the key must be 64 hex digits", id)
			continue
		}
		if _, dup := keys[id]; dup {
			bad(line, "device %q listed twice", id)
			continue
		}
		if len(keys) >= MaxKeys {
			bad(line, "more than %d devices", MaxKeys)
			break
		}
		keys[id] = key
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrKeyFile, err))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return keys, nil
}
