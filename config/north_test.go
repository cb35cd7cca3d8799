package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const northSink = "north:\n  sinks:\n    - name: up\n      kind: mqtt\n      url: tcp://127.0.0.1:1883\n"

// TestNorthValidate: each document is wrong in one way; the problem names
// its path and line.
func TestNorthValidate(t *testing.T) {
	for _, tt := range []struct {
		name, doc, path string
		line            int
		problem         string
	}{
		{"kind", strings.Replace(northSink, "mqtt", "amqp", 1), "north.sinks[0].kind", 4, "mqtt"},
		{"url scheme", strings.Replace(northSink, "tcp://", "http://", 1), "north.sinks[0].url", 5, "tcp://host:port"},
		{"duplicate name", northSink + "    - {name: up, kind: mqtt, url: 'tcp://h:1'}\n", "north.sinks[1].name", 6, "no other sink"},
		{"map filter", northSink + "      map: [{from: 'a/#/b', to: x}]\n", "north.sinks[0].map[0].from", 6, "last level"},
		{"map placeholder", northSink + "      map: [{from: 'a/+', to: 'x/{2}'}]\n", "north.sinks[0].map[0].to", 6, "{2} names no wildcard"},
		{"map unknown placeholder", northSink + "      map: [{from: 'a/+', to: 'x/{host}'}]\n", "north.sinks[0].map[0].to", 6, "unknown placeholder"},
		{"map qos", northSink + "      map: [{from: a, to: b, qos: 2}]\n", "north.sinks[0].map[0].qos", 6, "0 or 1"},
		{"map on", northSink + "      map: [{from: a, to: b, on: sometimes}]\n", "north.sinks[0].map[0].on", 6, "change"},
		{"commands without allow", northSink + "      commands: [{from: 'cmd/#', to: '{1}'}]\n", "north.sinks[0].allow", 3, "allow list"},
		{"store policy", northSink + "      store: {enabled: true, policy: newest}\n", "north.sinks[0].store.policy", 6, "refuse"},
		{"store sync", northSink + "      store: {sync: sometimes}\n", "north.sinks[0].store.sync", 6, "always"},
		{"store cap", northSink + "      store: {max_bytes: 1000}\n", "north.sinks[0].store.max_bytes", 6, "1 MiB"},
		{"keepalive", northSink + "      keepalive: 10ms\n", "north.sinks[0].keepalive", 6, "between 1s"},
		{"tls pair", northSink + "      tls: {cert_file: c.pem}\n", "north.sinks[0].tls.cert_file", 6, "go together"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := mustParse(t, tt.doc).Validate()
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Validate() = %v, want a problem at %s", err, tt.path)
			}
			for _, fe := range fieldErrors(err) {
				if fe.Path == tt.path {
					if fe.Line != tt.line || !strings.Contains(fe.Problem, tt.problem) {
						t.Errorf("got %q, want line %d and %q", fe, tt.line, tt.problem)
					}
					return
				}
			}
			t.Errorf("no problem at %s in:\n%v", tt.path, err)
		})
	}
}

// TestNorthDefaults: a sink's zero fields take their defaults, the store
// under data_dir; a misspelt key is caught with a suggestion.
func TestNorthDefaults(t *testing.T) {
	c := mustParse(t, "data_dir: /srv/edgemux\n"+northSink+"      map: [{from: 'a/#'}]\n      store: {enabled: true}\n")
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	s := c.North.Sinks[0]
	if s.ClientID != "edgemux-up" || s.KeepAlive != 30*time.Second || s.Inflight != 64 || s.Payload != "raw" ||
		s.Map[0].To != "{topic}" || s.Map[0].On != "update" || s.Will.Payload != "offline" || s.Will.Online != "online" {
		t.Errorf("sink defaults = %+v", s)
	}
	if st := s.Store; st.Dir != "/srv/edgemux/north/up" || st.MaxBytes != 256*mib || st.Policy != "oldest" || st.Sync != "interval" || st.DrainRate != 1000 {
		t.Errorf("store defaults = %+v", st)
	}
	_, err := Parse([]byte(northSink + "      clean_sesion: true\n"))
	if err == nil || !strings.Contains(err.Error(), "clean_session") {
		t.Errorf("misspelt key: %v", err)
	}
}
