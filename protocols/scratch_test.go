package protocols

import "testing"

func TestScratch(t *testing.T) {
	s := Scratch[*int]{Min: 4, Max: 8}
	p := s.Get(0)
	if len(*p) != 0 || cap(*p) < 4 {
		t.Fatalf("Get(0): len %d cap %d", len(*p), cap(*p))
	}
	v := 1
	*p = append(*p, &v, &v)
	s.Put(p)
	if len((*p)[:2]) == 2 && (*p)[:2][0] != nil {
		t.Fatal("Put left a pointer in the pooled slice")
	}
	if q := s.Get(16); cap(*q) < 16 {
		t.Fatalf("Get(16) cap %d", cap(*q))
	}
	big := make([]*int, 0, 64)
	s.Put(&big) // over Max: dropped, must not panic
	s.Put(nil)
}

func TestScratchGetPutDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	var s Scratch[byte]
	s.Min, s.Max = 64, 1024
	s.Put(s.Get(0))
	if n := testing.AllocsPerRun(1000, func() { s.Put(s.Get(10)) }); n > 0 {
		t.Fatalf("Get+Put allocates %v times", n)
	}
}
