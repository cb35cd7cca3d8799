package websocket

import (
	"bytes"
	"encoding/json"
	"testing"
)

// requestSamples are client messages: the shapes clients send, and the
// ones quickRequest leaves to encoding/json (quick: false).
var requestSamples = []struct {
	msg   string
	quick bool
}{
	{`{"op":"pub","topic":"plant/line1/temp","data":21.5}`, true},
	{` { "op" : "sub" , "topic" : "plant/#" , "retained" : false } `, true},
	{`{"op":"pub","topic":"a/b","data":{"v":[1,2,{"x":"}]"}],"s":"q\"uote"}}`, true},
	{`{"op":"pub","topic":"a/b","data":"running"}`, true},
	{`{"op":"pub","topic":"a/b","data":"line\nbreak"}`, true},
	{`{"op":"pub","topic":"température/salle","data":-1.5e3,"retained":true}`, true},
	{`{"data":[],"topic":"a","op":"pub"}`, true},
	{`{"op":"ping"}`, true},
	{`{"op":"unsub","topic":"a/+","retained":null}`, true},
	{`{}`, true},
	{`{"op":"frobnicate"}`, true},
	{`{"OP":"pub","Topic":"a","data":1}`, false},                 // encoding/json folds case
	{`{"op":"pub","op":"sub","topic":"a"}`, false},               // last one wins there
	{`{"op":"pub","topic":"a\/b","data":1}`, false},              // an escape
	{`{"op":"pub","topic":"a","data":null}`, true},               // null, held as it is
	{`{"op":"pub","topic":"a","data":1,"extra":{"x":1}}`, false}, // an unknown key
	{`{"op":1}`, false},                                          // a type error
	{`{"op":"sub","topic":"a","retained":"yes"}`, false},
	{"{\"op\":\"pub\",\"topic\":\"a\xffb\",\"data\":1}", false}, // invalid UTF-8
	{`["op","pub"]`, false},
	{`{"op":"pub"`, false}, // not JSON
	{`null`, false},
}

// TestDecodeRequest: every sample decodes as json.Unmarshal decodes it,
// by the quick path where the sample says so.
func TestDecodeRequest(t *testing.T) {
	for _, tt := range requestSamples {
		var quick request
		took := json.Valid([]byte(tt.msg)) && quickRequest([]byte(tt.msg), &quick)
		if took != tt.quick {
			t.Errorf("%s: quick path %v, want %v", tt.msg, took, tt.quick)
		}
		checkLikeUnmarshal(t, []byte(tt.msg))
	}
}

// FuzzDecodeRequest: whatever decodeRequest reads, json.Unmarshal reads
// the same way, error or not.
func FuzzDecodeRequest(f *testing.F) {
	for _, tt := range requestSamples {
		f.Add([]byte(tt.msg))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		checkLikeUnmarshal(t, msg)
	})
}

func checkLikeUnmarshal(t *testing.T, msg []byte) {
	t.Helper()
	var got, want request
	gotErr := decodeRequest(msg, &got)
	wantErr := json.Unmarshal(msg, &want)
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("%q: error %v, json.Unmarshal %v", msg, gotErr, wantErr)
	}
	if gotErr != nil {
		return
	}
	if got.Op != want.Op || got.Topic != want.Topic || !bytes.Equal(got.Data, want.Data) ||
		(got.Data == nil) != (want.Data == nil) ||
		(got.Retained == nil) != (want.Retained == nil) ||
		got.Retained != nil && *got.Retained != *want.Retained {
		t.Fatalf("%q: decoded %+v, json.Unmarshal %+v", msg, got, want)
	}
}
