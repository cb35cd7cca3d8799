package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edgemux/edgemux/examples/bench/wscompare/internal/gorillasrv"
	"github.com/edgemux/edgemux/examples/bench/wscompare/internal/nbiosrv"
)

func TestSourceAddr(t *testing.T) {
	cases := []struct {
		first   string
		i, per  int
		want    string
		wantErr bool
	}{
		{"127.0.0.2", 0, 2000, "127.0.0.2", false},
		{"127.0.0.2", 1999, 2000, "127.0.0.2", false},
		{"127.0.0.2", 2000, 2000, "127.0.0.3", false},
		{"127.0.0.2", 9999, 2000, "127.0.0.6", false},
		{"127.0.0.255", 1, 1, "127.0.1.0", false}, // carries into the next octet
		{"127.255.255.254", 0, 1, "127.255.255.254", false},
		{"127.255.255.254", 1, 1, "", true}, // would be the broadcast address
		{"10.0.0.1", 0, 1, "", true},        // loopback only
		{"::1", 0, 1, "", true},
		{"nonsense", 0, 1, "", true},
		{"127.0.0.2", 0, 0, "", true},
		{"127.0.0.2", -1, 1, "", true},
	}
	for _, tc := range cases {
		ip, err := SourceAddr(tc.first, tc.i, tc.per)
		if (err != nil) != tc.wantErr || (err == nil && ip.String() != tc.want) {
			t.Errorf("SourceAddr(%s, %d, %d) = %v, %v; want %s (err %v)", tc.first, tc.i, tc.per, ip, err, tc.want, tc.wantErr)
		}
		if err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("error %v is not ErrConfig", err)
		}
	}
}

var classifyCases = []struct {
	name string
	msg  string
	want Kind
}{
	{"fan-out", `{"topic":"bench/fan","data":3,"ts":1,"src":"websocket"}`, KindFanout},
	{"spaced", `{"topic": "bench/fan", "data": 3}`, KindFanout},
	{"probe", `{"topic":"bench/ready","data":0,"ts":1,"src":"websocket"}`, KindReady},
	{"error", `{"op":"error","code":400,"msg":"pubsub: malformed JSON"}`, KindOther},
	{"longer topic", `{"topic":"bench/fanx","data":1}`, KindOther},
	{"empty", ``, KindOther},
}

func TestClassify(t *testing.T) {
	for _, tc := range classifyCases {
		if got := Classify([]byte(tc.msg)); got != tc.want {
			t.Errorf("%s: Classify = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func FuzzClassify(f *testing.F) {
	for _, tc := range classifyCases {
		f.Add([]byte(tc.msg))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		if k := Classify(msg); k > KindFanout {
			t.Fatalf("kind %d", k)
		}
	})
}

func TestClassifyAllocs(t *testing.T) {
	msg := []byte(classifyCases[0].msg)
	if n := testing.AllocsPerRun(100, func() { Classify(msg) }); n != 0 {
		t.Fatalf("Classify allocates %.0f times", n)
	}
}

func BenchmarkClassify(b *testing.B) {
	msg := []byte(classifyCases[0].msg)
	b.ReportAllocs()
	for b.Loop() {
		Classify(msg)
	}
}

func TestConfigValidate(t *testing.T) {
	ok := Config{URL: "ws://127.0.0.1:1/ws", PID: 1, MetricsURL: "http://x"}
	cases := []struct {
		name   string
		mutate func(*Config)
		bad    string // substring of the error; "" = valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"fanout needs no pid", func(c *Config) { c.Mode, c.PID = ModeFanout, 0 }, ""},
		{"http url", func(c *Config) { c.URL = "http://x" }, "url"},
		{"too many conns", func(c *Config) { c.Conns = MaxConns + 1 }, "conns"},
		{"too many publishes", func(c *Config) { c.Publishes = MaxPublishes + 1 }, "publishes"},
		{"parallel", func(c *Config) { c.Parallel = maxParallel + 1 }, "parallel"},
		{"source", func(c *Config) { c.FirstSource = "192.0.2.1" }, "source"},
		{"mode", func(c *Config) { c.Mode = "soak" }, "mode"},
		{"idle needs pid", func(c *Config) { c.Mode, c.PID = ModeIdle, 0 }, "pid"},
	}
	for _, tc := range cases {
		c := ok
		tc.mutate(&c)
		err := c.withDefaults().validate()
		if tc.bad == "" && err != nil || tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)) {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err != nil && !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v is not ErrConfig", tc.name, err)
		}
	}
}

// peer starts one peer server on 127.0.0.1:0 and returns its ws URL and
// its /debug/mem URL.
type peer func(t *testing.T) (wsURL, memURL string)

func gorillaPeer(writer string) peer {
	return func(t *testing.T) (string, string) {
		srv, err := gorillasrv.New(gorillasrv.Config{Writer: writer})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(hs.Close)
		return "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws", hs.URL + "/debug/mem"
	}
}

func nbioPeer(t *testing.T) (string, string) {
	srv, err := nbiosrv.Start(nbiosrv.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	return fmt.Sprintf("ws://%s/ws", srv.Addr()), fmt.Sprintf("http://%s/debug/mem", srv.Addr())
}

// TestRunAgainstPeers runs the whole harness, small, against each peer in
// this process: every subscriber gets every publish, and the samples are
// filled in.
func TestRunAgainstPeers(t *testing.T) {
	peers := []struct {
		name  string
		start peer
	}{
		{"gorilla", gorillaPeer(gorillasrv.WriterGoroutine)},
		{"gorilla-mutex", gorillaPeer(gorillasrv.WriterMutex)},
		{"nbio", nbioPeer},
	}
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			wsURL, memURL := p.start(t)
			var progress strings.Builder
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			res, err := Run(ctx, Config{
				Server: p.name, URL: wsURL, Conns: 30, Publishes: 7, PerSource: 10,
				Settle: time.Millisecond, PID: os.Getpid(), MetricsURL: memURL, ForcedGC: true,
				Progress: &progress,
			})
			if err != nil {
				t.Fatalf("%v\n%s", err, progress.String())
			}
			if res.Conns != 30 || res.Expected != 210 || res.Delivered != 210 || res.Note != "" {
				t.Fatalf("result %+v", res)
			}
			if res.Idle.RSS <= 0 || res.AfterFanout.HeapInuse <= 0 || res.FanoutSecs <= 0 {
				t.Fatalf("samples not filled: %+v", res)
			}
			// The fan-out's peak: VmHWM reset at its start, its split sampled.
			if pk := res.PeakFanout; pk.Samples < 2 || !pk.HWMSeen || pk.RSS < pk.Sampled ||
				pk.Anon <= 0 || pk.File <= 0 || res.Idle.RSSAnon <= 0 || res.Idle.RSSFile <= 0 {
				t.Fatalf("peak not filled: %+v, idle %+v", pk, res.Idle)
			}
		})
	}
}

func TestRunDialFailure(t *testing.T) {
	// Port 1 on loopback refuses; the run reports it rather than hanging.
	res, err := Run(context.Background(), Config{
		URL: "ws://127.0.0.1:1/ws", Conns: 3, Mode: ModeFanout, DialTimeout: 2 * time.Second,
	})
	if !errors.Is(err, ErrDial) || res.Conns != 0 {
		t.Fatalf("got %+v, %v", res, err)
	}
}

func TestReadPrefix(t *testing.T) {
	cases := []struct {
		msg  string
		size int
		want string
	}{
		{"short", 8, "short"},
		{"exactly8", 8, "exactly8"},
		{"longer than the buffer", 8, "longer t"},
		{"", 8, ""},
	}
	for _, tc := range cases {
		r := strings.NewReader(tc.msg)
		buf := make([]byte, tc.size)
		n, err := readPrefix(r, buf)
		if err != nil || string(buf[:n]) != tc.want || r.Len() != 0 {
			t.Errorf("%q: got %q, %v, %d left", tc.msg, buf[:n], err, r.Len())
		}
	}
}
