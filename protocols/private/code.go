package private

import "errors"

// Code is an ERROR code and, for the codes this version defines, an ACK
// status (SPEC.md section 3). A Code is an error, so a client can return
// it and callers can test it with errors.Is.
type Code uint16

// Error codes. 1..15: protocol violations (fatal, counted as malformed);
// 16..31: one request failed, the connection stays; 32..47: server-side
// conditions that end the connection.
const (
	CodeOK              Code = 0
	CodeMalformed       Code = 1
	CodeBadCRC          Code = 2
	CodeBadVersion      Code = 3
	CodeFrameTooLarge   Code = 4
	CodeUnknownType     Code = 5
	CodeNotHelloFirst   Code = 6
	CodeHelloTwice      Code = 7
	CodeUnexpectedType  Code = 8
	CodeTopicTooLong    Code = 16
	CodeBadTopic        Code = 17
	CodeBadFilter       Code = 18
	CodeTooManySubs     Code = 19
	CodePayloadTooLarge Code = 20
	CodeInternal        Code = 21
	CodeBusy            Code = 22
	CodeCacheFull       Code = 23
	CodeTopicQuota      Code = 24
	CodeReservedTopic   Code = 25
	CodeNotWritable     Code = 26
	CodeBadValue        Code = 27
	CodeWriteFailed     Code = 28
	CodeSlowConsumer    Code = 32
	CodeGoingAway       Code = 33
)

var codeTexts = map[Code]string{
	CodeOK:              "ok",
	CodeMalformed:       "malformed",
	CodeBadCRC:          "bad crc",
	CodeBadVersion:      "unsupported version",
	CodeFrameTooLarge:   "frame too large",
	CodeUnknownType:     "unknown type",
	CodeNotHelloFirst:   "first frame must be HELLO",
	CodeHelloTwice:      "HELLO sent twice",
	CodeUnexpectedType:  "unexpected type",
	CodeTopicTooLong:    "topic too long",
	CodeBadTopic:        "bad topic",
	CodeBadFilter:       "bad filter",
	CodeTooManySubs:     "too many subscriptions",
	CodePayloadTooLarge: "payload too large",
	CodeInternal:        "internal error",
	CodeBusy:            "server busy",
	CodeCacheFull:       "last-value cache full",
	CodeTopicQuota:      "quota of new topics spent",
	CodeReservedTopic:   "topic reserved for the gateway",
	CodeNotWritable:     "topic is a device's value and not writable",
	CodeBadValue:        "value cannot be written to the device",
	CodeWriteFailed:     "the device did not take the write",
	CodeSlowConsumer:    "slow consumer",
	CodeGoingAway:       "gateway going away",
}

// Text is the code's short description, also sent as ERROR text.
func (c Code) Text() string {
	if s, ok := codeTexts[c]; ok {
		return s
	}
	return "unknown code"
}

// Error makes a Code usable as an error value.
func (c Code) Error() string { return "private: " + c.Text() }

// Fatal reports whether the connection ends after an ERROR with this code.
func (c Code) Fatal() bool {
	return (c >= 1 && c <= 15) || (c >= 32 && c <= 47)
}

// Violation reports whether the code is a protocol violation by the peer.
func (c Code) Violation() bool { return c >= 1 && c <= 15 }

// CodeOf maps a codec error to the code sent for it; CodeInternal for
// errors it does not know.
func CodeOf(err error) Code {
	var c Code
	switch {
	case err == nil:
		return CodeOK
	case errors.As(err, &c):
		return c
	case errors.Is(err, ErrBadMagic), errors.Is(err, ErrMalformed):
		return CodeMalformed
	case errors.Is(err, ErrBadCRC):
		return CodeBadCRC
	case errors.Is(err, ErrBadVersion):
		return CodeBadVersion
	case errors.Is(err, ErrFrameTooLarge):
		return CodeFrameTooLarge
	case errors.Is(err, ErrUnknownType):
		return CodeUnknownType
	}
	return CodeInternal
}
