package pubsub

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

var parseCases = []struct {
	name  string
	in    string
	op    Op
	topic string
	data  string
	err   error
}{
	{"sub", `{"op":"sub","topic":"t/#"}`, OpSub, "t/#", "", nil},
	{"unsub", `{"op":"unsub","topic":"plant/+/temp"}`, OpUnsub, "plant/+/temp", "", nil},
	{"pub number", `{"op":"pub","topic":"t/1","data":123}`, OpPub, "t/1", "123", nil},
	{"pub object", `{"op":"pub","topic":"a","data":{"v":[1,2]}}`, OpPub, "a", `{"v":[1,2]}`, nil},
	{"pub string", `{"topic":"a","op":"pub","data":"x"}`, OpPub, "a", `"x"`, nil},
	{"pub without data", `{"op":"pub","topic":"a"}`, 0, "", "", ErrMissingData},
	{"pub null data", `{"op":"pub","topic":"a","data":null}`, 0, "", "", ErrMissingData},
	{"pub wildcard", `{"op":"pub","topic":"a/+","data":1}`, 0, "", "", ErrBadTopic},
	{"sub bad filter", `{"op":"sub","topic":"a/#/b"}`, 0, "", "", ErrBadTopic},
	{"sub empty", `{"op":"sub","topic":""}`, 0, "", "", ErrBadTopic},
	{"sub partial wildcard", `{"op":"sub","topic":"a/b+"}`, 0, "", "", ErrBadTopic},
	{"sub too long", `{"op":"sub","topic":"` + strings.Repeat("a", MaxTopic+1) + `"}`, 0, "", "", ErrBadTopic},
	{"unknown op", `{"op":"get","topic":"a"}`, 0, "", "", ErrBadOp},
	{"no op", `{"topic":"a"}`, 0, "", "", ErrBadOp},
	{"not json", `sub t/#`, 0, "", "", ErrBadJSON},
	{"array", `[1,2]`, 0, "", "", ErrBadJSON},
	{"empty", ``, 0, "", "", ErrBadJSON},
	{"too large", `{"op":"pub","topic":"a","data":"` + strings.Repeat("x", MaxMessage) + `"}`, 0, "", "", ErrTooLarge},
	{"data too large", `{"op":"pub","topic":"a","data":"` + strings.Repeat("x", MaxData) + `"}`, 0, "", "", ErrTooLarge},
}

func TestParseRequest(t *testing.T) {
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := ParseRequest([]byte(tc.in))
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.Op != tc.op || req.Topic != tc.topic || string(req.Data) != tc.data {
				t.Fatalf("got %+v, want op %d topic %q data %s", req, tc.op, tc.topic, tc.data)
			}
		})
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, tc := range parseCases {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := ParseRequest(b)
		if err != nil {
			if len(EncodeError(err)) == 0 {
				t.Fatal("empty error reply")
			}
			return
		}
		switch req.Op {
		case OpSub, OpUnsub:
			if !ValidFilter(req.Topic) {
				t.Fatalf("accepted filter %q", req.Topic)
			}
		case OpPub:
			if !ValidTopic(req.Topic) || !json.Valid(req.Data) {
				t.Fatalf("accepted pub %q %q", req.Topic, req.Data)
			}
			push := EncodePush(req.Topic, req.Data, 1)
			if !json.Valid(push) {
				t.Fatalf("push is not JSON: %s", push)
			}
		default:
			t.Fatalf("op %d", req.Op)
		}
	})
}

var matchCases = []struct {
	filter, topic string
	want          bool
}{
	{"bench/#", "bench/fan", true},
	{"bench/#", "bench/a/b/c", true},
	{"bench/#", "bench", true},
	{"bench/#", "benchx/a", false},
	{"#", "anything/at/all", true},
	{"a/+/c", "a/b/c", true},
	{"a/+/c", "a/b/d", false},
	{"a/+/c", "a/b", false},
	{"a/+", "a", false},
	{"+", "a", true},
	{"+", "a/b", false},
	{"a", "a", true},
	{"a", "a/b", false},
	{"a/b", "a", false},
	{"a/b", "a/b", true},
	{"+/+", "a/", true},
	{"a//b", "a//b", true},
}

func TestMatch(t *testing.T) {
	for _, tc := range matchCases {
		if got := Match(tc.filter, tc.topic); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.filter, tc.topic, got, tc.want)
		}
	}
}

func TestValidFilter(t *testing.T) {
	cases := []struct {
		f    string
		want bool
	}{
		{"a/b", true}, {"#", true}, {"a/#", true}, {"+/+/#", true}, {"/", true},
		{"", false}, {"a/#/b", false}, {"a#", false}, {"a/+b", false}, {"a\x00", false},
		{strings.Repeat("a", MaxTopic), true}, {strings.Repeat("a", MaxTopic+1), false},
	}
	for _, tc := range cases {
		if got := ValidFilter(tc.f); got != tc.want {
			t.Errorf("ValidFilter(%q) = %v, want %v", tc.f, got, tc.want)
		}
	}
}

func FuzzMatch(f *testing.F) {
	for _, tc := range matchCases {
		f.Add(tc.filter, tc.topic)
	}
	f.Fuzz(func(t *testing.T, filter, topic string) {
		if !ValidFilter(filter) || !ValidTopic(topic) {
			return
		}
		got := Match(filter, topic)
		if want := matchSlow(filter, topic); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference says %v", filter, topic, got, want)
		}
		if ValidTopic(filter) && !Match(filter, filter) {
			t.Fatalf("a plain filter %q does not match itself", filter)
		}
	})
}

// matchSlow is the MQTT rule level by level, as a reference for the fuzzer.
func matchSlow(filter, topic string) bool {
	fl, tl := strings.Split(filter, "/"), strings.Split(topic, "/")
	for i, f := range fl {
		if f == "#" {
			return true
		}
		if i >= len(tl) || (f != "+" && f != tl[i]) {
			return false
		}
	}
	return len(fl) == len(tl)
}

func TestMatchAllocs(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { Match("plant/+/temp/#", "plant/7/temp/a/b") }); n != 0 {
		t.Fatalf("Match allocates %.0f times", n)
	}
}

func BenchmarkMatch(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Match("plant/+/temp/#", "plant/7/temp/a/b")
	}
}

func TestEncodePush(t *testing.T) {
	got := string(EncodePush("t/1", json.RawMessage(`123`), 42))
	want := `{"topic":"t/1","data":123,"ts":42,"src":"websocket"}`
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	if got := string(EncodePush("t", json.RawMessage(`{bad`), 1)); !json.Valid([]byte(got)) {
		t.Fatalf("invalid data made invalid JSON: %s", got)
	}
}

func TestEncodeError(t *testing.T) {
	cases := []struct {
		err  error
		code int
	}{
		{ErrBadJSON, CodeBadRequest},
		{ErrTooManySubs, CodeTooMany},
	}
	for _, tc := range cases {
		var w wireError
		if err := json.Unmarshal(EncodeError(tc.err), &w); err != nil {
			t.Fatal(err)
		}
		if w.Op != "error" || w.Code != tc.code || w.Msg != tc.err.Error() {
			t.Errorf("%v: got %+v", tc.err, w)
		}
	}
}
