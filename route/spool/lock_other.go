//go:build !unix

package spool

import (
	"os"
	"path/filepath"
)

// lockDir on systems without flock only creates the lock file: two Opens
// of one directory are not detected there (edgemux runs on Linux).
func lockDir(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o640)
}
