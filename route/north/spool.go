package north

import (
	"errors"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/route/spool"
)

// spoolStore is a Store over route/spool's Queue: one directory per sink.
type spoolStore struct{ q *spool.Queue }

// OpenSpool opens (creating) a sink's queue in cfg.Dir, recovering what a
// previous run left there; a corrupt tail is cut (the queue counts it).
func OpenSpool(cfg config.NorthStore) (Store, error) {
	policy, err := spool.ParsePolicy(cfg.Policy)
	if err != nil {
		return nil, err
	}
	sync, err := spool.ParseSync(cfg.Sync)
	if err != nil {
		return nil, err
	}
	q, err := spool.Open(spool.Options{Dir: cfg.Dir, MaxBytes: cfg.MaxBytes, Policy: policy, Sync: sync})
	if err != nil {
		return nil, err
	}
	return spoolStore{q}, nil
}

func (s spoolStore) Append(data []byte) (uint64, error) {
	seq, err := s.q.Append(data)
	if errors.Is(err, spool.ErrFull) {
		err = errors.Join(ErrStoreFull, err)
	}
	return seq, err
}

func (s spoolStore) AppendBatch(batch [][]byte) (uint64, int, error) {
	first, n, err := s.q.AppendBatch(batch)
	if errors.Is(err, spool.ErrFull) {
		err = errors.Join(ErrStoreFull, err)
	}
	return first, n, err
}

func (s spoolStore) Peek(max, maxBytes int) ([]StoreRecord, error) { return s.q.Peek(max, maxBytes) }

func (s spoolStore) PeekAfter(after uint64, max, maxBytes int) ([]StoreRecord, error) {
	return s.q.PeekAfter(after, max, maxBytes)
}

func (s spoolStore) Ack(seq uint64) error { return s.q.Ack(seq) }

func (s spoolStore) Stats() StoreStats {
	st := s.q.Stats()
	return StoreStats{Records: st.Records, Bytes: st.Bytes, Oldest: st.Oldest, OldestSeq: st.OldestSeq, Dropped: st.Dropped}
}

func (s spoolStore) Wait() <-chan struct{} { return s.q.Wait() }
func (s spoolStore) Close() error          { return s.q.Close() }
