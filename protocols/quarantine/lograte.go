package quarantine

import "time"

// logBucket is a token bucket of log lines: rate lines per second with a
// burst of one second's worth. It is written in its virtual-scheduling
// form (GCRA): instead of a token count it keeps the theoretical time at
// which the bucket would be full again, which needs one integer and no
// refill arithmetic. Times are nanoseconds since the book's epoch.
//
// It is not safe for concurrent use; the book guards it.
type logBucket struct {
	interval   int64  // nanoseconds per token
	burst      int64  // how far ahead of now the schedule may run
	tat        int64  // theoretical arrival time of the next token
	suppressed uint64 // lines refused since the last allowed one
}

func newLogBucket(rate int) logBucket {
	interval := max(int64(time.Second)/int64(rate), 1)
	return logBucket{interval: interval, burst: interval * int64(rate)}
}

// take reports whether a line may be logged at now. When it may, it also
// returns how many lines were suppressed since the previous allowed one,
// so the line can say so.
func (l *logBucket) take(now int64) (ok bool, suppressedBefore uint64) {
	tat := max(l.tat, now)
	if tat-now >= l.burst {
		l.suppressed++
		return false, 0
	}
	l.tat = tat + l.interval
	suppressedBefore, l.suppressed = l.suppressed, 0
	return true, suppressedBefore
}
