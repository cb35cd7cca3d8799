package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fieldErrors flattens the errors.Join tree Validate returns.
func fieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		var fe *FieldError
		switch e := err.(type) {
		case nil:
		case interface{ Unwrap() []error }:
			for _, inner := range e.Unwrap() {
				walk(inner)
			}
		default:
			if errors.As(err, &fe) {
				out = append(out, fe)
			}
		}
	}
	walk(err)
	return out
}

// quarantineOnly ends a routes list that must not fail on its own.
const quarantineOnly = "  - match: {proto: '*'}\n    action: quarantine\n"

// validateCases: each document is invalid in one way (other problems may
// follow from it); the error must name path, line and a word of problem.
var validateCases = []struct {
	name    string
	doc     string
	path    string
	line    int
	problem string
}{
	{"listen not host:port", "listen: nope\n", "listen", 1, "ip:port"},
	{"listen port too big", "listen: 127.0.0.1:70000\n", "listen", 1, "0..65535"},
	{"listen port not numeric", "listen: 127.0.0.1:http\n", "listen", 1, "0..65535"},
	{"listen host name", "listen: example.com:5020\n", "listen", 1, "IP address"},
	{"loops", "loops: 300\n", "loops", 1, "between 0 and 256"},
	{"max_conns zero", "limits:\n  max_conns: 0\n", "limits.max_conns", 2, "between 1 and 1000000"},
	{"max_conns huge", "limits:\n  max_conns: 2000000\n", "limits.max_conns", 2, "between 1 and 1000000"},
	{"per-ip over total", "limits:\n  max_conns: 100\n  max_sniffing: 50\n", "limits.max_conns_per_ip", 1, "limits.max_conns"},
	{"sniffing over total", "limits:\n  max_conns: 100\n  max_conns_per_ip: 10\n", "limits.max_sniffing", 1, "limits.max_conns"},
	{"sniffing per-ip over sniffing", "limits:\n  max_sniffing: 100\n", "limits.max_sniffing_per_ip", 1, "limits.max_sniffing"},
	{"max_input under a frame", "limits:\n  max_input: 1024\n", "limits.max_input", 2, "private frame"},
	{"emfile_pause", "limits:\n  emfile_pause: 1m\n", "limits.emfile_pause", 2, "between 1ms and 10s"},
	{"modbus unit id", "modbus:\n  unit_ids: [1, 300]\n", "modbus.unit_ids[1]", 2, "between 0 and 255"},
	{"modbus bool register", "modbus:\n  tags:\n    - {topic: a, table: coil, address: 0, type: float32}\n", "modbus.tags[0].type", 3, "bool"},
	{"modbus unknown type", "modbus:\n  tags:\n    - {topic: a, table: holding, address: 0, type: double}\n", "modbus.tags[0].type", 3, "float32"},
	{"upstream line kind", "modbus:\n  upstream:\n    lines:\n      - {name: a, kind: ascii, address: x}\n", "modbus.upstream.lines[0].kind", 4, "rtu-over-tcp"},
	{"upstream baud", "modbus:\n  upstream:\n    lines:\n      - {name: a, kind: rtu, address: /dev/ttyS0, baud: 1000}\n", "modbus.upstream.lines[0].baud", 4, "standard rate"},
	{"upstream unknown line", "modbus:\n  upstream:\n    devices:\n      - {name: d, line: nope, unit_id: 1}\n", "modbus.upstream.devices[0].line", 4, "modbus.upstream.lines"},
	{"upstream gateway unit twice", "modbus:\n  upstream:\n    lines:\n      - {name: a, kind: tcp, address: 'h:1'}\n    devices:\n      - {name: d, line: a, unit_id: 1, gateway_unit: 9}\n      - {name: e, line: a, unit_id: 2, gateway_unit: 9}\n",
		"modbus.upstream.devices[1].gateway_unit", 7, "devices[0]"},
	{"poll tag type", "modbus:\n  upstream:\n    lines:\n      - {name: a, kind: tcp, address: 'h:1'}\n    devices:\n      - name: d\n        line: a\n        unit_id: 1\n        poll:\n          interval: 1s\n          tags:\n            - {topic: t, table: holding, type: float16}\n",
		"modbus.upstream.devices[0].poll.tags[0].type", 12, "float64"},
	{"poll tag wider than max_registers", "modbus:\n  upstream:\n    lines:\n      - {name: a, kind: tcp, address: 'h:1'}\n    devices:\n      - name: d\n        line: a\n        unit_id: 1\n        poll:\n          max_registers: 2\n          tags:\n            - {topic: t, table: holding, type: uint64}\n",
		"modbus.upstream.devices[0].poll.tags[0].type", 12, "max_registers"},
	{"poll bit on a coil", "modbus:\n  upstream:\n    lines:\n      - {name: a, kind: tcp, address: 'h:1'}\n    devices:\n      - name: d\n        line: a\n        unit_id: 1\n        poll:\n          tags:\n            - {topic: t, table: coil, type: bool, bit: 3}\n",
		"modbus.upstream.devices[0].poll.tags[0].bit", 11, "bit field"},
	{"poll writable input", "modbus:\n  upstream:\n    lines:\n      - {name: a, kind: tcp, address: 'h:1'}\n    devices:\n      - name: d\n        line: a\n        unit_id: 1\n        poll:\n          tags:\n            - {topic: t, table: input, type: uint16, writable: true}\n",
		"modbus.upstream.devices[0].poll.tags[0].writable", 11, "coil"},
	{"poll readback not writable", "modbus:\n  upstream:\n    lines:\n      - {name: a, kind: tcp, address: 'h:1'}\n    devices:\n      - name: d\n        line: a\n        unit_id: 1\n        poll:\n          tags:\n            - {topic: t, table: holding, type: uint16, readback: true}\n",
		"modbus.upstream.devices[0].poll.tags[0].readback", 11, "writable"},
	{"poll topic twice", "modbus:\n  upstream:\n    lines:\n      - {name: a, kind: tcp, address: 'h:1'}\n    devices:\n      - name: d\n        line: a\n        unit_id: 1\n        poll:\n          tags:\n            - {topic: t, table: holding, type: uint16}\n            - {topic: t, table: holding, address: 1, type: uint16}\n",
		"modbus.upstream.devices[0].poll.tags[1].topic", 12, "already"},
	{"poll writable topic too long", "modbus:\n  upstream:\n    lines:\n      - {name: a, kind: tcp, address: 'h:1'}\n    devices:\n      - name: d\n        line: a\n        unit_id: 1\n        poll:\n          tags:\n            - {topic: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa, table: holding, type: uint16, writable: true}\n",
		"modbus.upstream.devices[0].poll.tags[0].topic", 11, "result topic"},
	{"poll interval", "modbus:\n  upstream:\n    lines:\n      - {name: a, kind: tcp, address: 'h:1'}\n    devices:\n      - name: d\n        line: a\n        unit_id: 1\n        poll:\n          interval: 1ms\n", "modbus.upstream.devices[0].poll.interval", 10, "10ms"},
	{"dial-in line with an address", "modbus:\n  upstream:\n    lines:\n      - {name: a, kind: dial-in, address: 'h:1', identity: '7'}\n", "modbus.upstream.lines[0].address", 4, "shared port"},
	{"dial-in line without identity", "modbus:\n  upstream:\n    lines:\n      - {name: a, kind: dial-in}\n", "modbus.upstream.lines[0].identity", 4, "identity"},
	{"dial-in identity too wide", "modbus:\n  upstream:\n    lines:\n      - {name: a, kind: dial-in, identity: '70000'}\n", "modbus.upstream.lines[0].identity", 4, "1 register"},
	{"dial-in identity twice", "modbus:\n  upstream:\n    lines:\n      - {name: a, kind: dial-in, identity: '7'}\n      - {name: b, kind: dial-in, identity: '007'}\n", "modbus.upstream.lines[1].identity", 5, "lines[0]"},
	{"dial-in source identity", "modbus:\n  upstream:\n    dial_in:\n      identify_by: source\n    lines:\n      - {name: a, kind: dial-in, identity: dtu1}\n", "modbus.upstream.lines[0].identity", 6, "IP address"},
	{"dial-in probe function", "modbus:\n  upstream:\n    dial_in:\n      probe:\n        function: 1\n", "modbus.upstream.dial_in.probe.function", 5, "holding"},
	{"dial-in probe count", "modbus:\n  upstream:\n    dial_in:\n      id_format: string\n      probe:\n        count: 17\n", "modbus.upstream.dial_in.probe.count", 6, "1..16"},
	{"dial-in max devices", "modbus:\n  upstream:\n    dial_in:\n      max_devices: 1\n    lines:\n      - {name: a, kind: dial-in, identity: '1'}\n      - {name: b, kind: dial-in, identity: '2'}\n", "modbus.upstream.dial_in.max_devices", 4, "2 lines"},
	{"dial-in without a probe", "sniff:\n  probe: ''\nmodbus:\n  upstream:\n    lines:\n      - {name: a, kind: dial-in, identity: '1'}\n", "sniff.probe", 2, "takes modbus"},
	{"dial-in probe pool takes coap too", "sniff:\n  probe: field\npools:\n  field: {workers: 1, protocols: [modbus, coap]}\nmodbus:\n  upstream:\n    lines:\n      - {name: a, kind: dial-in, identity: '1'}\n", "sniff.probe", 2, "nothing else"},
	{"identity on a tcp line", "modbus:\n  upstream:\n    lines:\n      - {name: a, kind: tcp, address: 'h:1', identity: '1'}\n", "modbus.upstream.lines[0].identity", 4, "only a dial-in"},
	{"upstream unit id", "modbus:\n  upstream:\n    lines:\n      - {name: a, kind: tcp, address: 'h:1'}\n    devices:\n      - {name: d, line: a, unit_id: 248}\n", "modbus.upstream.devices[0].unit_id", 6, "247"},
	{"modbus overlap", "modbus:\n  tags:\n    - {topic: a, table: holding, address: 0, type: uint32}\n    - {topic: b, table: holding, address: 1, type: int16}\n",
		"modbus.tags[1].address", 4, "overlaps modbus.tags[0]"},
	{"modbus writable input", "modbus:\n  tags:\n    - {topic: a, table: input, address: 0, type: int16, writable: true}\n", "modbus.tags[0].writable", 3, "read-only"},
	{"modbus past the end", "modbus:\n  tags:\n    - {topic: a, table: holding, address: 65535, type: uint32}\n", "modbus.tags[0].address", 3, "0..65535"},
	{"modbus wildcard topic", "modbus:\n  tags:\n    - {topic: 'a/#', table: holding, address: 0, type: int16}\n", "modbus.tags[0].topic", 3, "without + or #"},
	{"modbus scale on a coil", "modbus:\n  tags:\n    - {topic: a, table: coil, address: 0, type: bool, scale: 2}\n", "modbus.tags[0].scale", 3, "register"},
	{"memory_limit tiny", "limits:\n  memory_limit: 1048576\n", "limits.memory_limit", 2, "at least 33554432"},
	{"memory_limit negative", "limits:\n  memory_limit: -1\n", "limits.memory_limit", 2, "between 0 and"},
	{"gc_percent tiny", "limits:\n  gc_percent: 5\n", "limits.gc_percent", 2, "at least 10"},
	{"gc_percent huge", "limits:\n  gc_percent: 5000\n", "limits.gc_percent", 2, "between 0 and 1000"},
	{"budget small", "sniff:\n  budget: 8\n", "sniff.budget", 2, "between 16 and 65536"},
	{"deadline short", "sniff:\n  deadline: 10ms\n", "sniff.deadline", 2, "between 100ms and 5m"},
	{"deadline negative", "sniff:\n  deadline: -1s\n", "sniff.deadline", 2, "not -1s"},
	{"tls budget under budget", "sniff:\n  tls_budget: 100\n", "sniff.tls_budget", 2, "sniff.budget"},
	{"probe pool missing", "sniff:\n  probe: edge\n", "sniff.probe", 2, `"edge"`},
	{"policy", "dispatch:\n  policy: fifo\n", "dispatch.policy", 2, "inline | roundrobin | entropy"},
	{"ring not power of two", "dispatch:\n  ring_size: 1000\n", "dispatch.ring_size", 2, "power of two"},
	{"ring too small", "dispatch:\n  ring_size: 32\n", "dispatch.ring_size", 2, "power of two"},
	{"history huge", "dispatch:\n  history: 2000000\n", "dispatch.history", 2, "between 0 and 1048576"},
	{"history negative", "dispatch:\n  history: -1\n", "dispatch.history", 2, "between 0 and 1048576"},
	{"workers zero", "pools:\n  private:\n    workers: 0\n", "pools.private.workers", 3, "between 1 and 256"},
	{"pattern", "pools:\n  private:\n    pattern: wavy\n", "pools.private.pattern", 3, "long-period"},
	{"idle timeout tiny", "pools:\n  private:\n    idle_timeout: 500ms\n", "pools.private.idle_timeout", 3, "0 (never)"},
	{"mixed pool without protocols", "pools:\n  edge:\n    workers: 1\n", "pools.edge.protocols", 2, "must list"},
	{"pool protocol unknown", "pools:\n  edge:\n    protocols: [modbus, ftp]\n", "pools.edge.protocols[1]", 3, `"ftp"`},
	{"pool protocol twice", "pools:\n  edge:\n    protocols: [modbus, modbus]\n", "pools.edge.protocols[1]", 3, "twice"},
	{"quarantine pool removed", "loops: 1\npools:\n  quarantine: ~\n", "pools.quarantine", 3, "must be defined"},
	{"no routes", "routes: []\n", "routes", 1, "between 1 and 1024"},
	{"route action", "routes:\n  - match: {proto: http}\n    action: drop\n", "routes[0].action", 3, "handle | forward"},
	{"route proto", "routes:\n  - match: {proto: mqtt}\n    action: quarantine\n", "routes[0].match.proto", 2, `"mqtt"`},
	{"route proto empty", "routes:\n  - action: quarantine\n", "routes[0].match.proto", 2, `not ""`},
	{"sni without tls", "routes:\n  - match: {proto: http, sni: a.example}\n    action: admin\n" + quarantineOnly,
		"routes[0].match.sni", 2, "only with proto tls"},
	{"sni malformed", "routes:\n  - match: {proto: tls, sni: 'a..b'}\n    action: quarantine\n",
		"routes[0].match.sni", 2, "host name"},
	{"source not CIDR", "routes:\n  - match: {proto: http, source: 10.0.0.1}\n    action: admin\n" + quarantineOnly,
		"routes[0].match.source", 2, "CIDR"},
	{"forward without backend", "routes:\n  - match: {proto: tls}\n    action: forward\n" + quarantineOnly,
		"routes[0].backend", 2, "host:port"},
	{"forward backend port 0", "routes:\n  - match: {proto: tls}\n    action: forward\n    backend: 'x:0'\n" + quarantineOnly,
		"routes[0].backend", 4, "1..65535"},
	{"forward dial timeout", "routes:\n  - match: {proto: tls}\n    action: forward\n    backend: 'x:1'\n    dial_timeout: 1h\n",
		"routes[0].dial_timeout", 5, "between 100ms and 1m"},
	{"handle without pool", "routes:\n  - match: {proto: tls}\n    action: handle\n" + quarantineOnly,
		"routes[0].pool", 2, `no pool "tls"`},
	{"handle any without pool", "routes:\n  - match: {proto: '*'}\n    action: handle\n",
		"routes[0].pool", 2, "must name its pool"},
	{"handle named pool missing", "routes:\n  - match: {proto: coap}\n    action: handle\n    pool: edge\n",
		"routes[0].pool", 4, `no pool "edge"`},
	{"handle pool wrong proto", "routes:\n  - match: {proto: coap}\n    action: handle\n    pool: private\n",
		"routes[0].pool", 4, "does not take proto coap"},
	{"pool on forward", "routes:\n  - match: {proto: tls}\n    action: forward\n    backend: 'x:1'\n    pool: private\n",
		"routes[0].pool", 5, "only with action handle"},
	{"backend on handle", "routes:\n  - match: {proto: private}\n    action: handle\n    backend: 'x:1'\n",
		"routes[0].backend", 4, "only with action forward"},
	{"admin not http", "routes:\n  - match: {proto: modbus}\n    action: admin\n", "routes[0].action", 3, "proto http"},
	{"route after catch-all", "routes:\n" + quarantineOnly + "  - match: {proto: http}\n    action: admin\n",
		"routes[1]", 4, "never matches"},
	{"sample bytes", "quarantine:\n  sample_bytes: 0\n", "quarantine.sample_bytes", 2, "between 1 and 4096"},
	{"hold", "quarantine:\n  hold: 0s\n", "quarantine.hold", 2, "between 100ms and 10m"},
	{"ban_for", "quarantine:\n  ban_for: 720h\n", "quarantine.ban_for", 2, "and 168h"},
	{"max_frame", "private:\n  max_frame: 8\n", "private.max_frame", 2, "between 16 and 16777216"},
	{"hello_within", "private:\n  hello_within: 0s\n", "private.hello_within", 2, "between 100ms and 5m"},
	{"bus drop", "bus:\n  drop: latest\n", "bus.drop", 2, "oldest | newest | disconnect"},
	{"bus payload", "bus:\n  max_payload: 0\n", "bus.max_payload", 2, "between 1 and"},
	{"bus quota over max_topics", "bus:\n  max_topics: 10\n  topic_quota: 11\n", "bus.topic_quota", 3, "must not exceed bus.max_topics (10)"},
	{"bus quota zero", "bus:\n  topic_quota: 0\n", "bus.topic_quota", 2, "between 1 and"},
	{"bus queue bytes", "bus:\n  queue_bytes: 1000\n", "bus.queue_bytes", 2, "between 65536 and"},
	{"modbus no_value", "modbus:\n  no_value: nan\n", "modbus.no_value", 2, "exception | zero"},
	{"modbus max_age", "modbus:\n  max_age: -1s\n", "modbus.max_age", 2, "between 0s and 24h"},
	{"admin conns", "admin:\n  max_conns: 0\n", "admin.max_conns", 2, "between 1 and 10000"},
	{"udp batch", "udp:\n  batch: 2000\n", "udp.batch", 2, "between 1 and 1024"},
	{"udp max datagram", "udp:\n  max_datagram: 70000\n", "udp.max_datagram", 2, "between 64 and 65535"},
	{"udp read buffer", "udp:\n  read_buffer: 100\n", "udp.read_buffer", 2, "0 (the kernel's default) or at least 4096"},
	{"udp write buffer", "udp:\n  write_buffer: -1\n", "udp.write_buffer", 2, "between 0 and"},
	{"udp queue", "udp:\n  queue: 0\n", "udp.queue", 2, "between 1 and 1024"},
	{"coap block size", "coap:\n  block_size: 100\n", "coap.block_size", 2, "power of two"},
	{"coap peers zero", "coap:\n  max_peers: 0\n", "coap.max_peers", 2, "between 1 and 1000000"},
	{"coap confirm interval", "coap:\n  confirm_interval: 48h\n", "coap.confirm_interval", 2, "between 1s and 24h"},
	{"coap message over max_input", "coap:\n  tcp_max_message: 100000\n", "coap.tcp_max_message", 2, "limits.max_input"},
	{"coap delete filter", "coap:\n  delete: [\"a/#/b\"]\n", "coap.delete[0]", 2, "last level"},
	{"coap delete wildcard", "coap:\n  delete: [\"a/b+\"]\n", "coap.delete[0]", 2, "whole level"},
	{"udp route class", "udp:\n  routes:\n    modbus: private\n", "udp.routes.modbus", 3, "coap | rudp"},
	{"udp route pool", "udp:\n  routes:\n    rudp: nowhere\n", "udp.routes.rudp", 3, `pool in pools other than quarantine, not "nowhere" (pools: coap, modbus, private, websocket; or rudp: "" to drop rudp datagrams)`},
	{"udp route quarantine", "udp:\n  routes:\n    coap: quarantine\n", "udp.routes.coap", 3, "other than quarantine"},
	{"udp route to a removed pool", "pools:\n  private: ~\nudp:\n  routes:\n    rudp: private\n", "udp.routes.rudp", 5, `not "private"`},
	{"rudp datagram over udp's", "rudp:\n  max_datagram: 4000\n", "rudp.max_datagram", 2, "at most udp.max_datagram (2048)"},
	{"rudp message over the window", "rudp:\n  window: 8\n", "rudp.max_message", 1, "half of rudp.window"},
	{"rudp send queue under a message", "rudp:\n  send_queue: 4096\n", "rudp.send_queue", 2, "at least rudp.max_message"},
	{"rudp keepalive not below idle", "rudp:\n  keepalive: 30s\n", "rudp.keepalive", 2, "below rudp.idle_timeout"},
	{"rudp max_rto under min_rto", "rudp:\n  max_rto: 100ms\n", "rudp.max_rto", 2, "at least rudp.min_rto"},
	{"rudp window", "rudp:\n  window: 2\n", "rudp.window", 2, "between 4 and 32768"},
	{"handle to a datagram pool", "pools:\n  rudp: {workers: 1}\nudp:\n  routes: {rudp: rudp}\nroutes:\n  - match: {proto: '*'}\n    action: handle\n    pool: rudp\n",
		"routes[0].pool", 8, "serves datagrams only"},
	{"datagram pool unrouted", "pools:\n  rudp: {workers: 1}\n", "pools.rudp.protocols", 2, "or a udp.routes entry must name it"},
	{"ws path relative", "websocket:\n  path: ws\n", "websocket.path", 2, "absolute path"},
	{"ws path query", "websocket:\n  path: /ws?x=1\n", "websocket.path", 2, "absolute path"},
	{"ws subprotocol", "websocket:\n  subprotocol: 'a b'\n", "websocket.subprotocol", 2, "HTTP token"},
	{"ws subprotocol empty", "websocket:\n  subprotocol: ''\n", "websocket.subprotocol", 2, "HTTP token"},
	{"ws origin with path", "websocket:\n  allowed_origins: ['https://a.example/x']\n", "websocket.allowed_origins[0]", 2, "no path"},
	{"ws origin bare host", "websocket:\n  allowed_origins: [a.example]\n", "websocket.allowed_origins[0]", 2, "scheme://host"},
	{"ws star not alone", "websocket:\n  allowed_origins: ['http://a.example', '*']\n", "websocket.allowed_origins[1]", 2, "only entry"},
	{"ws header bytes", "websocket:\n  max_header_bytes: 100\n", "websocket.max_header_bytes", 2, "between 256 and 65536"},
	{"ws max_message", "websocket:\n  max_message: 0\n", "websocket.max_message", 2, "between 16 and"},
	{"ws high_water", "websocket:\n  high_water: 10\n", "websocket.high_water", 2, "between 1024 and"},
	{"ws slow consumer", "websocket:\n  slow_consumer: block\n", "websocket.slow_consumer", 2, "close | drop"},
	{"ws ping interval", "websocket:\n  ping_interval: 10ms\n", "websocket.ping_interval", 2, "between 1s and 1h"},
	{"ws missed pongs", "websocket:\n  missed_pongs: 0\n", "websocket.missed_pongs", 2, "between 1 and 100"},
	{"ws handshake timeout", "websocket:\n  handshake_timeout: 1h\n", "websocket.handshake_timeout", 2, "between 100ms and 5m"},
	{"ws max subs", "websocket:\n  max_subs: 0\n", "websocket.max_subs", 2, "between 1 and 65536"},
	{"max_input under a handshake", "limits:\n  max_input: 4096\npools:\n  private: ~\n", "limits.max_input", 2, "WebSocket handshake"},
	{"log level", "log:\n  level: verbose\n", "log.level", 2, "debug | info"},
	{"log format", "log:\n  format: xml\n", "log.format", 2, "text | json"},
}

func TestValidate(t *testing.T) {
	for _, tt := range validateCases {
		t.Run(tt.name, func(t *testing.T) {
			err := mustParse(t, tt.doc).Validate()
			if err == nil {
				t.Fatalf("Validate() = nil, want a problem at %s", tt.path)
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error does not wrap ErrInvalid: %v", err)
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

func TestValidateMessageFormat(t *testing.T) {
	err := mustParse(t, "loops: 1\nlimits:\n  max_conns_per_ip: 10\n  max_conns: 0\n").Validate()
	want := "limits.max_conns: must be between 1 and 1000000, not 0 (line 4)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error = %v, want it to contain %q", err, want)
	}
	// A value from the defaults, with no line anywhere above it.
	c := Defaults()
	c.Log.Level = "loud"
	if err := c.Validate(); err == nil || err.Error() != `log.level: must be one of debug | info | warn | error, not "loud"` {
		t.Fatalf("error without a line = %v", err)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	doc := `loops: -1
sniff:
  budget: 1
dispatch:
  policy: random
routes:
  - match: {proto: nope}
    action: handle
log:
  format: xml
`
	err := mustParse(t, doc).Validate()
	want := map[string]int{
		"loops": 1, "sniff.budget": 3, "dispatch.policy": 5,
		"routes[0].match.proto": 7, "routes[0].pool": 7, "log.format": 10,
	}
	got := map[string]int{}
	for _, fe := range fieldErrors(err) {
		got[fe.Path] = fe.Line
	}
	for path, line := range want {
		if got[path] != line {
			t.Errorf("%s: line %d, want %d (all: %v)", path, got[path], line, got)
		}
	}
}

func TestValidateCapsProblems(t *testing.T) {
	var b strings.Builder
	b.WriteString("routes:\n")
	for range maxRoutes {
		b.WriteString("  - match: {proto: bad}\n    action: bad\n")
	}
	err := mustParse(t, b.String()).Validate()
	if n := len(fieldErrors(err)); n != maxProblems {
		t.Errorf("%d field errors, want %d", n, maxProblems)
	}
	if !strings.Contains(err.Error(), "more problems not shown") || !errors.Is(err, ErrInvalid) {
		t.Errorf("no summary of the dropped problems: ...%s", err.Error()[len(err.Error())-80:])
	}
}

func TestValidateAccepts(t *testing.T) {
	docs := []string{
		"listen: ':5020'\n",
		"listen: '[::1]:0'\n",
		"loops: 4\nudp: {sockets: 4}\n",
		"pools:\n  rudp: {workers: 2}\nudp:\n  routes: {rudp: rudp, coap: private}\n  read_buffer: 0\n",
		"pools:\n  edge: {workers: 4, protocols: [modbus, coap]}\n  private: ~\n" +
			"routes:\n  - match: {proto: modbus, source: '10.0.0.0/8'}\n    action: handle\n    pool: edge\n" +
			"  - match: {proto: tls, sni: '*.legacy.example'}\n    action: forward\n    backend: legacy.example:443\n" +
			"  - match: {proto: tls, sni: Exact.Example}\n    action: forward\n    backend: '[::1]:8443'\n    dial_timeout: 500ms\n" +
			"  - match: {proto: '*', source: '::1/128'}\n    action: handle\n    pool: quarantine\n" + quarantineOnly,
		"sniff:\n  probe: quarantine\n",
		"limits:\n  max_input: 64\npools:\n  private: ~\n  websocket: ~\n  coap: ~\nudp:\n  routes: {coap: \"\"}\nroutes:\n" + quarantineOnly,
		"websocket:\n  allowed_origins: ['*']\n",
		"modbus:\n  unit_ids: [1, 255]\n  tags:\n    - {topic: a, table: holding, address: 0, type: uint32}\n" +
			"    - {topic: b, table: holding, address: 2, type: float32, writable: true, scale: 0.5}\n" +
			"    - {topic: c, table: coil, address: 0, type: bool, writable: true}\n    - {topic: d, table: input, address: 0, type: int16}\n",
		"websocket:\n  allowed_origins: ['https://plant.example:8443', 'http://127.0.0.1:5020']\n  path: /api/v1/live\n",
	}
	for _, doc := range docs {
		if err := mustParse(t, doc).Validate(); err != nil {
			t.Errorf("Validate(%q):\n%v", doc, err)
		}
	}
}

func TestShortDuration(t *testing.T) {
	tests := map[string]string{"5m0s": "5m", "1h0m0s": "1h", "1h30m0s": "1h30m", "100ms": "100ms", "1m30s": "1m30s"}
	for in, want := range tests {
		d, err := time.ParseDuration(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestModbusLinePerDevice: a Modbus TCP device is a line of its own, so
// a plant of 500 such devices is 500 lines (refused at 256 lines before).
func TestModbusLinePerDevice(t *testing.T) {
	var b strings.Builder
	b.WriteString("modbus:\n  upstream:\n    lines:\n")
	for i := range 500 {
		fmt.Fprintf(&b, "      - {name: l%d, kind: tcp, address: '127.1.%d.%d:502'}\n", i, i/250, 1+i%250)
	}
	b.WriteString("    devices:\n")
	for i := range 500 {
		fmt.Fprintf(&b, "      - {name: d%d, line: l%d, unit_id: 1}\n", i, i)
	}
	cfg, err := Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}
