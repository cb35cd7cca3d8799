package config

import (
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// North is the northbound side: sinks that carry bus messages to an MQTT
// broker and bring commands back (route/north). None by default: with no
// sink nothing starts.
type North struct {
	Sinks []NorthSink `yaml:"sinks"` // one connection each
}

// NorthSink is one uplink. Zero fields take the defaults Normalize gives
// (the README lists them).
type NorthSink struct {
	Name         string         `yaml:"name"`          // for metrics and logs; unique
	Kind         string         `yaml:"kind"`          // mqtt | nats
	URL          string         `yaml:"url"`           // mqtt: tcp://host:1883 | ssl://host:8883 (mqtt://, mqtts://); nats: nats://host:4222 | tls://host:4222
	ClientID     string         `yaml:"client_id"`     // "" = edgemux-<name>
	CleanSession bool           `yaml:"clean_session"` // false: a persistent session (commands queued by the broker while away)
	KeepAlive    time.Duration  `yaml:"keepalive"`     // 0 = 30s
	Username     string         `yaml:"username"`      // "" = none
	PasswordFile string         `yaml:"password_file"` // file holding the password; "" = none
	TLS          NorthTLS       `yaml:"tls"`           // used by ssl:// and mqtts:// URLs
	Will         NorthWill      `yaml:"will"`          // the gateway's state topic; "" = none
	Payload      string         `yaml:"payload"`       // raw | envelope; "" = raw
	Inflight     int            `yaml:"inflight"`      // QoS 1 publishes awaiting their PUBACK at once (with a store: per drain batch); 0 = 64
	ChangeTable  int            `yaml:"change_table"`  // topics remembered for on: change; 0 = 65536
	Map          []NorthMap     `yaml:"map"`           // bus filter -> remote topic
	Commands     []NorthCommand `yaml:"commands"`      // remote filter -> bus topic
	Allow        []string       `yaml:"allow"`         // bus filters commands may publish to
	Store        NorthStore     `yaml:"store"`         // store-and-forward
	JetStream    NorthJetStream `yaml:"jetstream"`     // nats: publish to JetStream with acks
}

// NorthJetStream makes a NATS sink publish through JetStream: every
// publish waits for the stream's ack. The stream must exist (its limits,
// replicas and retention are the operator's); until it does the sink is
// not up and queues (with a store).
type NorthJetStream struct {
	Stream string `yaml:"stream"` // "" = core NATS
}

// NorthTLS are a sink's certificates; relative paths are the process's.
type NorthTLS struct {
	CAFile     string `yaml:"ca_file"`     // CAs the broker's certificate must chain to; "" = the system's
	CertFile   string `yaml:"cert_file"`   // client certificate, with key_file
	KeyFile    string `yaml:"key_file"`    // its private key
	ServerName string `yaml:"server_name"` // name checked in the broker's certificate; "" = the URL's host
}

// NorthWill is the gateway's state on the broker: Online is published
// retained to Topic on every connect, Payload (the last will) by the
// broker when the connection dies without a DISCONNECT.
type NorthWill struct {
	Topic   string `yaml:"topic"`   // "" = no will, no online message; {gateway} is the gateway's name
	Payload string `yaml:"payload"` // "" = offline
	Online  string `yaml:"online"`  // "" = online
	QoS     int    `yaml:"qos"`     // 0 | 1
	Retain  bool   `yaml:"retain"`  // keep it as the topic's retained value (the online message too)
}

// NorthMap is one mapping, HiveMQ Edge style.
type NorthMap struct {
	From   string `yaml:"from"`   // bus filter
	To     string `yaml:"to"`     // remote topic template: {topic}, {1}.. (the filter's wildcard levels), {gateway}; "" = {topic}
	QoS    int    `yaml:"qos"`    // 0 | 1
	Retain bool   `yaml:"retain"` // publish retained
	On     string `yaml:"on"`     // update (every message) | change (only a payload unlike the last sent); "" = update
}

// NorthCommand maps remote messages into the bus.
type NorthCommand struct {
	From string `yaml:"from"` // remote filter subscribed (QoS 1)
	To   string `yaml:"to"`   // bus topic template: {topic} (the remote topic), {1}.. its wildcard levels; "" = {topic}
}

// NorthStore is a sink's on-disk queue (route/spool).
type NorthStore struct {
	Enabled   bool   `yaml:"enabled"`    // every message goes through the queue on disk
	Dir       string `yaml:"dir"`        // "" = <data_dir>/north/<name>
	MaxBytes  int64  `yaml:"max_bytes"`  // 0 = 256 MiB
	Policy    string `yaml:"policy"`     // oldest | refuse; "" = oldest
	Sync      string `yaml:"sync"`       // interval | always | never; "" = interval
	DrainRate int    `yaml:"drain_rate"` // messages/s while a backlog drains; 0 = 1000
}

// Northbound limits and defaults.
const (
	maxNorthSinks     = 16
	maxNorthMaps      = 64 // a bus subscriber holds at most 64 filters
	maxNorthCommands  = 64
	maxNorthAllow     = 256
	maxNorthTopic     = 256   // a filter or template, bytes
	maxNorthInflight  = 16384 // with a store's live publishes (16,384 more) well within MQTT's 16-bit packet ids
	DefaultDataDir    = "/var/lib/edgemux"
	defaultKeepAlive  = 30 * time.Second
	defaultInflight   = 64
	defaultChangeTab  = 65536
	defaultStoreBytes = 256 * mib
	defaultDrainRate  = 1000
)

var (
	northKinds    = []string{"mqtt", "nats"}
	natsSchemes   = []string{"nats", "tls"}
	northPayloads = []string{"raw", "envelope"}
	northOn       = []string{"update", "change"}
	storePolicies = []string{"oldest", "refuse"}
	storeSyncs    = []string{"interval", "always", "never"}
	mqttSchemes   = []string{"tcp", "mqtt", "ssl", "tls", "mqtts"}
)

// normalizeNorth fills in each sink's defaults.
func (c *Config) normalizeNorth() {
	if len(c.North.Sinks) == 0 {
		c.North.Sinks = nil
	}
	for i := range c.North.Sinks {
		s := &c.North.Sinks[i]
		orString(&s.ClientID, "edgemux-"+s.Name)
		orString(&s.Payload, "raw")
		orString(&s.Will.Payload, "offline")
		orString(&s.Will.Online, "online")
		if s.KeepAlive == 0 {
			s.KeepAlive = defaultKeepAlive
		}
		if s.Inflight == 0 {
			s.Inflight = defaultInflight
		}
		if s.ChangeTable == 0 {
			s.ChangeTable = defaultChangeTab
		}
		for j := range s.Map {
			orString(&s.Map[j].To, "{topic}")
			orString(&s.Map[j].On, "update")
		}
		for j := range s.Commands {
			orString(&s.Commands[j].To, "{topic}")
		}
		st := &s.Store
		orString(&st.Dir, filepath.Join(c.DataDir, "north", s.Name))
		orString(&st.Policy, "oldest")
		orString(&st.Sync, "interval")
		if st.MaxBytes == 0 {
			st.MaxBytes = defaultStoreBytes
		}
		if st.DrainRate == 0 {
			st.DrainRate = defaultDrainRate
		}
	}
}

func orString(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

// checkNorth checks the north section: names unique, URLs of a known
// scheme, every list and number within its limit, filters and templates
// well formed.
func (v *validator) checkNorth() {
	sinks := v.c.North.Sinks
	if len(sinks) > maxNorthSinks {
		v.fail("north.sinks", "at most %d sinks, not %d", maxNorthSinks, len(sinks))
		return
	}
	if v.c.DataDir == "" {
		v.fail("data_dir", "must be a directory path")
	}
	names := map[string]bool{}
	for i, s := range sinks {
		at := "north.sinks[" + strconv.Itoa(i) + "]"
		if !validSinkName(s.Name) || names[s.Name] {
			v.fail(at+".name", "must be a name of 1 to 64 letters, digits, - or _ that no other sink has, not %q", s.Name)
		}
		names[s.Name] = true
		v.oneOf(at+".kind", s.Kind, northKinds)
		v.oneOf(at+".payload", s.Payload, northPayloads)
		v.checkNorthKind(at, s)
		if len(s.ClientID) > 65535 {
			v.fail(at+".client_id", "must be at most 65535 bytes")
		}
		if s.KeepAlive < time.Second || s.KeepAlive > 18*time.Hour {
			v.fail(at+".keepalive", "must be between 1s and 18h, not %s", shortDuration(s.KeepAlive))
		}
		if s.Inflight < 1 || s.Inflight > maxNorthInflight || s.ChangeTable < 1 || s.ChangeTable > 16*mib {
			v.fail(at+".inflight", "inflight must be 1..%d and change_table 1..%d, not %d and %d", maxNorthInflight, 16*mib, s.Inflight, s.ChangeTable)
		}
		if (s.TLS.CertFile == "") != (s.TLS.KeyFile == "") {
			v.fail(at+".tls.cert_file", "cert_file and key_file go together")
		}
		v.checkNorthWill(at+".will", s.Will)
		v.checkNorthMaps(at, s)
		v.checkNorthStore(at+".store", s.Store)
	}
}

// checkNorthKind checks what depends on the engine: the URL's scheme,
// and for NATS that nothing asks for MQTT's retain.
func (v *validator) checkNorthKind(at string, s NorthSink) {
	u, err := url.Parse(s.URL)
	if s.Kind == "nats" {
		if err != nil || u.Host == "" || !contains(natsSchemes, u.Scheme) {
			v.fail(at+".url", "must be nats://host:port or tls://host:port, not %q", s.URL)
		}
		retain := s.Will.Retain
		for _, m := range s.Map {
			retain = retain || m.Retain
		}
		if retain {
			v.fail(at+".map", "retain is MQTT's: NATS has none (a JetStream stream with max_msgs_per_subject: 1 keeps last values)")
		}
		return
	}
	if err != nil || u.Host == "" || !contains(mqttSchemes, u.Scheme) {
		v.fail(at+".url", "must be tcp://host:port or ssl://host:port (mqtt://, mqtts:// too), not %q", s.URL)
	}
	if s.JetStream.Stream != "" {
		v.fail(at+".jetstream", "is for kind nats")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func validSinkName(n string) bool {
	if n == "" || len(n) > 64 {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func (v *validator) checkNorthWill(at string, w NorthWill) {
	if w.QoS < 0 || w.QoS > 1 {
		v.fail(at+".qos", "must be 0 or 1, not %d", w.QoS)
	}
	if w.Topic != "" && remoteTopicProblem(w.Topic) != "" {
		v.fail(at+".topic", "%s", remoteTopicProblem(w.Topic))
	}
}

// checkNorthMaps checks the mappings, the commands and the allow list.
func (v *validator) checkNorthMaps(at string, s NorthSink) {
	if len(s.Map) > maxNorthMaps || len(s.Commands) > maxNorthCommands || len(s.Allow) > maxNorthAllow {
		v.fail(at+".map", "at most %d maps, %d commands and %d allow filters, not %d, %d and %d",
			maxNorthMaps, maxNorthCommands, maxNorthAllow, len(s.Map), len(s.Commands), len(s.Allow))
		return
	}
	for j, m := range s.Map {
		mat := at + ".map[" + strconv.Itoa(j) + "]"
		if problem := coapFilterProblem(m.From); problem != "" {
			v.fail(mat+".from", "%s", problem)
		}
		v.checkTemplate(mat+".to", m.To, m.From)
		if m.QoS < 0 || m.QoS > 1 {
			v.fail(mat+".qos", "must be 0 or 1, not %d", m.QoS)
		}
		v.oneOf(mat+".on", m.On, northOn)
	}
	for j, c := range s.Commands {
		cat := at + ".commands[" + strconv.Itoa(j) + "]"
		if problem := coapFilterProblem(c.From); problem != "" {
			v.fail(cat+".from", "%s", problem)
		}
		v.checkTemplate(cat+".to", c.To, c.From)
	}
	if len(s.Commands) > 0 && len(s.Allow) == 0 {
		v.fail(at+".allow", "commands need an allow list of the bus filters they may publish to")
	}
	for j, f := range s.Allow {
		if problem := coapFilterProblem(f); problem != "" {
			v.fail(at+".allow["+strconv.Itoa(j)+"]", "%s", problem)
		}
	}
}

// checkTemplate checks a topic template: its placeholders are {topic},
// {gateway} or {N} for a wildcard level filter has.
func (v *validator) checkTemplate(at, tmpl, filter string) {
	if tmpl == "" || len(tmpl) > maxNorthTopic {
		v.fail(at, "must be a topic template of 1 to %d bytes", maxNorthTopic)
		return
	}
	wild := 0
	for _, level := range strings.Split(filter, "/") {
		if level == "+" || level == "#" {
			wild++
		}
	}
	rest := tmpl
	for {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			break
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			v.fail(at, "an unclosed { in %q", tmpl)
			return
		}
		name := rest[open+1 : open+end]
		if n, err := strconv.Atoi(name); err == nil {
			if n < 1 || n > wild {
				v.fail(at, "{%d} names no wildcard level of %q (it has %d)", n, filter, wild)
			}
		} else if name != "topic" && name != "gateway" {
			v.fail(at, "unknown placeholder {%s}: {topic}, {gateway} or {1}..{%d}", name, wild)
		}
		rest = rest[open+end+1:]
	}
	if strings.ContainsAny(tmpl, "+#") {
		v.fail(at, "a topic template has no wildcards (+, #): %q", tmpl)
	}
}

// remoteTopicProblem checks a literal remote topic.
func remoteTopicProblem(t string) string {
	if len(t) > maxNorthTopic || strings.ContainsAny(t, "+#\x00") {
		return "must be a topic of 1 to 256 bytes without wildcards"
	}
	return ""
}

func (v *validator) checkNorthStore(at string, st NorthStore) {
	v.oneOf(at+".policy", st.Policy, storePolicies)
	v.oneOf(at+".sync", st.Sync, storeSyncs)
	if st.MaxBytes < mib || st.MaxBytes > 1<<40 {
		v.fail(at+".max_bytes", "must be between 1 MiB and 1 TiB, not %d", st.MaxBytes)
	}
	if st.DrainRate < 1 || st.DrainRate > 1000000 {
		v.fail(at+".drain_rate", "must be between 1 and 1000000 messages/s, not %d", st.DrainRate)
	}
	if st.Dir == "" {
		v.fail(at+".dir", "must be a directory path")
	}
}
