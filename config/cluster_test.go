package config

import (
	"strings"
	"testing"
)

// TestClusterValidate: each bad cluster value is reported with its path
// and line, all of them at once.
func TestClusterValidate(t *testing.T) {
	doc := `cluster:
  mode: nast
  urls: ["http://x:1", "nats://u:p@h:4222"]
  gateway_id: "a b"
  topics: ["a/#/b"]
  kv_bucket: "b.c"
  subject_prefix: "x..y"
  storage: disk
  replicas: 2
  tls:
    cert_file: c.pem
  creds_file: x.creds
  user: me
  limits:
    max_pending: 1
`
	cfg, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	errs := fieldErrors(cfg.Validate())
	want := map[string]int{
		"cluster.mode": 2, "cluster.urls[0]": 3, "cluster.urls[1]": 3, "cluster.gateway_id": 4,
		"cluster.topics[0]": 5, "cluster.kv_bucket": 6, "cluster.subject_prefix": 7, "cluster.storage": 8,
		"cluster.replicas": 9, "cluster.tls.cert_file": 11, "cluster.creds_file": 12,
		"cluster.user": 13, "cluster.limits.max_pending": 15,
	}
	got := map[string]int{}
	for _, e := range errs {
		got[e.Path] = e.Line
	}
	for path, line := range want {
		if l, ok := got[path]; !ok {
			t.Errorf("no error for %s; got %v", path, errs)
		} else if l != line && !strings.HasPrefix(path, "cluster.urls[") {
			t.Errorf("%s: line %d, want %d", path, l, line)
		}
	}
}

// TestClusterDefaultsOff: the default is no cluster, valid as it is.
func TestClusterDefaultsOff(t *testing.T) {
	c := Defaults()
	if c.Cluster.Mode != "none" || len(c.Cluster.Topics) != 1 || c.Cluster.Topics[0] != "#" {
		t.Errorf("cluster defaults = %+v", c.Cluster)
	}
	on := mustParse(t, "cluster:\n  mode: nats\n  gateway_id: gw-1\n  replicas: 3\n")
	if err := on.Validate(); err != nil {
		t.Error(err)
	}
}
