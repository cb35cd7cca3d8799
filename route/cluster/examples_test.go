package cluster

import (
	"path/filepath"
	"testing"

	"github.com/edgemux/edgemux/route/cluster/natstest"
)

// TestExampleNATSConfigs: the nats-server configurations of
// examples/cluster (one server, three cluster nodes) are valid for the
// server the tests run. The gateway YAMLs beside them are checked with
// every other example (config.TestExampleConfigsLoad).
func TestExampleNATSConfigs(t *testing.T) {
	files, err := filepath.Glob("../../examples/cluster/*.conf")
	if err != nil || len(files) != 4 {
		t.Fatalf("examples/cluster/*.conf: %v %v, want 4 files", files, err)
	}
	for _, f := range files {
		natstest.CheckConfig(t, f)
	}
}
