package config

import (
	"net/url"
	"strconv"
	"strings"
)

// Cluster makes the topic bus span gateways through NATS JetStream
// (route/cluster). With mode none, the default, nothing starts and
// nothing changes.
type Cluster struct {
	Mode          string        `yaml:"mode"`           // none | nats
	URLs          []string      `yaml:"urls"`           // NATS servers: nats://host:port or tls://host:port
	GatewayID     string        `yaml:"gateway_id"`     // this gateway's name in the cluster, unique; "" = the hostname
	Topics        []string      `yaml:"topics"`         // bus filters whose topics span the gateways
	KVBucket      string        `yaml:"kv_bucket"`      // JetStream KV bucket of the last values (created if missing)
	SubjectPrefix string        `yaml:"subject_prefix"` // prefix of the cluster's control subjects (the gateway id probe)
	Storage       string        `yaml:"storage"`        // file | memory: where JetStream keeps the bucket
	Replicas      int           `yaml:"replicas"`       // copies of the bucket: 1, or 3 on a three-node NATS cluster
	TLS           ClusterTLS    `yaml:"tls"`            // TLS to the NATS servers
	CredsFile     string        `yaml:"creds_file"`     // NATS credentials file (JWT + nkey); "" = none
	User          string        `yaml:"user"`           // user name; "" = none
	PasswordFile  string        `yaml:"password_file"`  // file holding the user's password
	Limits        ClusterLimits `yaml:"limits"`
}

// ClusterTLS is the client side of TLS to NATS.
type ClusterTLS struct {
	CAFile   string `yaml:"ca_file"`   // CA bundle that signs the servers' certificates; "" = the system's
	CertFile string `yaml:"cert_file"` // client certificate, with key_file; "" = none
	KeyFile  string `yaml:"key_file"`
}

// ClusterLimits bound what the cluster link holds.
type ClusterLimits struct {
	MaxPayload int `yaml:"max_payload"` // bytes per mirrored message; a longer one stays local, counted as dropped
	MaxPending int `yaml:"max_pending"` // messages waiting to go to NATS, topics remembered while it is down, and messages received not yet published locally
	MaxLoad    int `yaml:"max_load"`    // last values loaded from the bucket at start; the rest are counted, not loaded
}

// The cluster modes and storages.
var (
	clusterModes    = []string{"none", "nats"}
	clusterStorages = []string{"file", "memory"}
)

// defaultCluster is the cluster section's defaults, also in default.yaml.
func defaultCluster() Cluster {
	return Cluster{
		Mode: "none", URLs: []string{"nats://127.0.0.1:4222"}, Topics: []string{"#"},
		KVBucket: "edgemux", SubjectPrefix: "edgemux", Storage: "file", Replicas: 1,
		Limits: ClusterLimits{MaxPayload: 65536, MaxPending: 65536, MaxLoad: 100000},
	}
}

// checkCluster checks the cluster section, whatever its mode, so a file
// that turns it on later is already right.
func (v *validator) checkCluster() {
	c := v.c.Cluster
	v.oneOf("cluster.mode", c.Mode, clusterModes)
	v.oneOf("cluster.storage", c.Storage, clusterStorages)
	if len(c.URLs) == 0 || len(c.URLs) > 16 {
		v.fail("cluster.urls", "must list 1 to 16 NATS servers, not %d", len(c.URLs))
	}
	for i, u := range c.URLs {
		if p := natsURLProblem(u); p != "" {
			v.fail("cluster.urls["+strconv.Itoa(i)+"]", "%s", p)
		}
	}
	if id := c.GatewayID; id != "" && !natsName(id, 64) {
		v.fail("cluster.gateway_id", "must be 1 to 64 letters, digits, - or _ (or \"\" for the hostname), not %q", id)
	}
	if len(c.Topics) == 0 || len(c.Topics) > 64 {
		v.fail("cluster.topics", "must list 1 to 64 topic filters, not %d", len(c.Topics))
	}
	for i, f := range c.Topics {
		if p := coapFilterProblem(f); p != "" {
			v.fail("cluster.topics["+strconv.Itoa(i)+"]", "%s", p)
		}
	}
	if !natsName(c.KVBucket, 64) {
		v.fail("cluster.kv_bucket", "must be 1 to 64 letters, digits, - or _, not %q", c.KVBucket)
	}
	if !subjectPrefixOK(c.SubjectPrefix) {
		v.fail("cluster.subject_prefix", "must be NATS subject tokens of letters, digits, - or _ joined by dots, not %q", c.SubjectPrefix)
	}
	if c.Replicas != 1 && c.Replicas != 3 && c.Replicas != 5 {
		v.fail("cluster.replicas", "must be 1, 3 or 5 (JetStream replicas), not %d", c.Replicas)
	}
	if (c.TLS.CertFile == "") != (c.TLS.KeyFile == "") {
		v.fail("cluster.tls.cert_file", "cert_file and key_file go together")
	}
	if c.CredsFile != "" && c.User != "" {
		v.fail("cluster.creds_file", "creds_file and user (+ password_file) are two ways to log in: choose one")
	}
	if c.User != "" && c.PasswordFile == "" {
		v.fail("cluster.user", "needs password_file, the file holding its password")
	}
	if c.User == "" && c.PasswordFile != "" {
		v.fail("cluster.password_file", "needs user")
	}
	v.checkClusterLimits(c.Limits)
}

func (v *validator) checkClusterLimits(l ClusterLimits) {
	for _, r := range []struct {
		path     string
		n        int
		min, max int
	}{
		{"cluster.limits.max_payload", l.MaxPayload, 1, 8 * mib},
		{"cluster.limits.max_pending", l.MaxPending, 16, 1 << 24},
		{"cluster.limits.max_load", l.MaxLoad, 1, 10000000},
	} {
		if r.n < r.min || r.n > r.max {
			v.fail(r.path, "must be between %d and %d, not %d", r.min, r.max, r.n)
		}
	}
}

// natsURLProblem checks one server URL as the NATS client takes it.
func natsURLProblem(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "nats" && u.Scheme != "tls") {
		return "must be nats://host:port or tls://host:port, not " + strconv.Quote(s)
	}
	if u.User != nil {
		return "must not carry a user or password (use user and password_file, or creds_file): " + strconv.Quote(u.Redacted())
	}
	return ""
}

// natsName reports whether s is 1 to max letters, digits, '-' or '_':
// what a KV bucket name, a NATS subject token and a KV key part all take.
func natsName(s string, max int) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func subjectPrefixOK(p string) bool {
	if p == "" || len(p) > 128 {
		return false
	}
	for _, tok := range strings.Split(p, ".") {
		if !natsName(tok, 128) {
			return false
		}
	}
	return true
}
