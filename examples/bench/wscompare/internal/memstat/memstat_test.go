package memstat

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
)

const promText = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 18
# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use.
go_memstats_heap_inuse_bytes_total 1
go_memstats_heap_inuse_bytes 5.488640e+06
go_info{version="go1.26.8"} 1
`

var valueCases = []struct {
	name, text, series string
	want               float64
	err                error
}{
	{"gauge", promText, Goroutines, 18, nil},
	{"exponent, longer name first", promText, HeapInuse, 5488640, nil},
	{"labels are not the bare series", promText, "go_info", 0, ErrNoSeries},
	{"missing", promText, "nope", 0, ErrNoSeries},
	{"tab and timestamp", "x\t12 1700000000\n", "x", 12, nil},
	{"bad value", "x abc\n", "x", 0, ErrBadValue},
	{"no value", "x \n", "x", 0, ErrBadValue},
	{"empty", "", "x", 0, ErrNoSeries},
}

func TestValue(t *testing.T) {
	for _, tc := range valueCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Value([]byte(tc.text), tc.series)
			if !errors.Is(err, tc.err) || got != tc.want {
				t.Fatalf("got %v, %v; want %v, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func FuzzValue(f *testing.F) {
	for _, tc := range valueCases {
		f.Add([]byte(tc.text), tc.series)
	}
	f.Fuzz(func(t *testing.T, text []byte, series string) {
		_, _ = Value(text, series) // must not panic
	})
}

var rssCases = []struct {
	name, status string
	want         int64
	err          error
}{
	{"real", "Name:\tgorilla\nVmPeak:\t  100 kB\nVmRSS:\t   45656 kB\nRssAnon:\t 1 kB\n", 45656 * 1024, nil},
	{"missing", "Name:\tx\n", 0, ErrNoRSS},
	{"no unit", "VmRSS:\t12\n", 0, ErrBadValue},
	{"negative", "VmRSS:\t-12 kB\n", 0, ErrBadValue},
	{"huge", "VmRSS:\t99999999999999999 kB\n", 0, ErrBadValue},
	{"junk", "VmRSS:\tlots kB\n", 0, ErrBadValue},
}

func TestParseVmRSS(t *testing.T) {
	for _, tc := range rssCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseVmRSS([]byte(tc.status))
			if !errors.Is(err, tc.err) || got != tc.want {
				t.Fatalf("got %v, %v; want %v, %v", got, err, tc.want, tc.err)
			}
		})
	}
}

func FuzzParseVmRSS(f *testing.F) {
	for _, tc := range rssCases {
		f.Add([]byte(tc.status))
	}
	f.Fuzz(func(t *testing.T, status []byte) {
		if v, err := ParseVmRSS(status); err == nil && v < 0 {
			t.Fatalf("negative RSS %d", v)
		}
	})
}

// TestTakeSelf samples this very process through Handler, as loadgen
// samples a peer server.
func TestTakeSelf(t *testing.T) {
	srv := httptest.NewServer(Handler())
	t.Cleanup(srv.Close)
	s, err := Take(context.Background(), srv.Client(), os.Getpid(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if s.RSS <= 0 || s.HeapInuse <= 0 || s.Goroutines <= 0 {
		t.Fatalf("implausible sample %+v", s)
	}
}

func TestFetchErrors(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(srv.Close)
	if _, err := Fetch(context.Background(), srv.Client(), srv.URL); !errors.Is(err, ErrHTTP) {
		t.Fatalf("404: %v", err)
	}
	if _, err := Fetch(context.Background(), srv.Client(), "::bad"); !errors.Is(err, ErrHTTP) {
		t.Fatalf("bad url: %v", err)
	}
	if _, err := RSS(-1); err == nil {
		t.Fatal("RSS of pid -1 succeeded")
	}
}

var loadCases = []struct {
	text string
	want float64
	ok   bool
}{
	{"17.69 15.81 11.35 18/323 21382\n", 17.69, true},
	{"0.00 0.01 0.05 1/100 1", 0, true},
	{"", 0, false},
	{"-1 0 0", 0, false},
	{"high 0 0", 0, false},
}

func TestParseLoadAvg(t *testing.T) {
	for _, tc := range loadCases {
		got, err := ParseLoadAvg([]byte(tc.text))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%q: %v, %v", tc.text, got, err)
		}
		if err != nil && !errors.Is(err, ErrBadValue) {
			t.Errorf("%q: %v is not ErrBadValue", tc.text, err)
		}
	}
	if _, err := LoadAvg(); err != nil {
		t.Fatal(err)
	}
}

func FuzzParseLoadAvg(f *testing.F) {
	for _, tc := range loadCases {
		f.Add([]byte(tc.text))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		if v, err := ParseLoadAvg(text); err == nil && !(v >= 0 && v <= 1e6) {
			t.Fatalf("out of range %v", v)
		}
	})
}

var statCases = []struct {
	name, stat string
	want       float64
	err        error
}{
	{"real", "21132 (gorilla) S 1 21132 1 0 -1 4194560 1207 0 0 0 450 183 0 0 20 0 8 0 313 2712932 91359", 6.33, nil},
	{"odd name", "7 (a) b (c) R 1 7 1 0 -1 0 0 0 0 0 12 8 0 0 20 0 1 0 1 1 1", 0.2, nil},
	{"no name", "7 a R 1", 0, ErrBadValue},
	{"short", "7 (a) R 1 2 3", 0, ErrBadValue},
	{"negative", "7 (a) R 1 7 1 0 -1 0 0 0 0 0 -12 8 0", 0, ErrBadValue},
	{"junk", "7 (a) R 1 7 1 0 -1 0 0 0 0 0 x 8 0", 0, ErrBadValue},
}

func TestParseCPUSeconds(t *testing.T) {
	for _, tc := range statCases {
		got, err := ParseCPUSeconds([]byte(tc.stat))
		if !errors.Is(err, tc.err) || got != tc.want {
			t.Errorf("%s: got %v, %v; want %v, %v", tc.name, got, err, tc.want, tc.err)
		}
	}
	if _, err := CPUSeconds(os.Getpid()); err != nil {
		t.Fatal(err)
	}
}

func FuzzParseCPUSeconds(f *testing.F) {
	for _, tc := range statCases {
		f.Add([]byte(tc.stat))
	}
	f.Fuzz(func(t *testing.T, stat []byte) {
		if v, err := ParseCPUSeconds(stat); err == nil && v < 0 {
			t.Fatalf("negative %v", v)
		}
	})
}
