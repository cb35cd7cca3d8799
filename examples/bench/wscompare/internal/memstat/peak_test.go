package memstat

import (
	"errors"
	"os"
	"testing"
	"time"
)

func TestParseResident(t *testing.T) {
	status := "Name:\tedgemux\nVmHWM:\t   60000 kB\nVmRSS:\t   50000 kB\nRssAnon:\t   38000 kB\nRssFile:\t   12000 kB\nRssShmem:\t0 kB\n"
	got, err := ParseResident([]byte(status))
	want := Resident{RSS: 50000 << 10, HWM: 60000 << 10, Anon: 38000 << 10, File: 12000 << 10}
	if err != nil || got != want {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	for _, tc := range rssCases {
		if _, err := ParseResident([]byte(tc.status)); !errors.Is(err, tc.err) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.err)
		}
	}
	if _, err := ParseResident([]byte("VmRSS:\t1 kB\nRssAnon:\tx kB\n")); !errors.Is(err, ErrBadValue) {
		t.Errorf("bad RssAnon: %v", err)
	}
}

// TestPeakKeepsTheLargestSample: the split is the largest sample's, and
// the reset VmHWM raises the peak above what sampling saw.
func TestPeakKeepsTheLargestSample(t *testing.T) {
	p := Peak{HWMSeen: true}
	p.observe(Resident{RSS: 10, HWM: 10, Anon: 4, File: 6})
	p.observe(Resident{RSS: 30, HWM: 30, Anon: 20, File: 10})
	p.observe(Resident{RSS: 20, HWM: 35, Anon: 12, File: 8})
	if p.RSS != 35 || p.Sampled != 30 || p.Anon != 20 || p.File != 10 || p.Samples != 3 {
		t.Fatalf("peak %+v", p)
	}
	q := Peak{} // VmHWM not reset: it is the whole life's and is left out
	q.observe(Resident{RSS: 10, HWM: 99, Anon: 4, File: 6})
	if q.RSS != 10 {
		t.Fatalf("unreset VmHWM counted: %+v", q)
	}
}

// TestSamplerSeesThisProcessGrow samples this process while it touches
// 64 MiB: the peak must hold them, in RssAnon.
func TestSamplerSeesThisProcessGrow(t *testing.T) {
	before, err := ReadResident(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	s := StartSampler(os.Getpid(), time.Millisecond)
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	p := s.Stop()
	if !p.HWMSeen {
		t.Fatal("VmHWM of this very process could not be reset")
	}
	if p.RSS < before.RSS+60<<20 || p.Anon < before.Anon+60<<20 || p.File <= 0 {
		t.Fatalf("before %+v, peak %+v", before, p)
	}
	_ = buf[len(buf)-4096]
}
