//go:build !benchslow

package gateway

import (
	"time"

	"github.com/edgemux/edgemux/sniff"
)

// benchSlowBuild is false in every build but a benchmark one (benchslow.go):
// the worker's slow-handler branch is compiled out.
const benchSlowBuild = false

// benchSlowFor is never true outside a benchmark build.
func benchSlowFor(*conn) bool { return false }

var benchSlow struct {
	proto sniff.Proto
	delay time.Duration
}
