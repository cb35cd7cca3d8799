package gateway

import (
	"net/netip"
	"sync"

	"github.com/edgemux/edgemux/config"
)

// admission counts open and still-sniffing connections per source IP and in
// all, for the caps in config.Limits. One mutex is enough: it is taken at
// accept, classification and close, never per byte.
type admission struct {
	mu       sync.Mutex
	perIP    map[netip.Addr]*ipCount
	sniffing int
}

type ipCount struct{ open, sniffing int }

func newAdmission() *admission { return &admission{perIP: map[netip.Addr]*ipCount{}} }

// admit counts a new connection from ip, or returns the name of the limit
// that refuses it. total is the number of connections open now.
func (a *admission) admit(ip netip.Addr, lim *config.Limits, total int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.perIP[ip]
	switch {
	case total >= lim.MaxConns:
		return "max_conns"
	case a.sniffing >= lim.MaxSniffing:
		return "max_sniffing"
	case c != nil && c.open >= lim.MaxConnsPerIP:
		return "max_conns_per_ip"
	case c != nil && c.sniffing >= lim.MaxSniffingPerIP:
		return "max_sniffing_per_ip"
	}
	if c == nil {
		c = &ipCount{}
		a.perIP[ip] = c
	}
	c.open++
	c.sniffing++
	a.sniffing++
	return ""
}

// doneSniffing is called once when a connection leaves the sniffing state.
func (a *admission) doneSniffing(ip netip.Addr) {
	a.mu.Lock()
	if c := a.perIP[ip]; c != nil && c.sniffing > 0 {
		c.sniffing--
		a.sniffing--
	}
	a.mu.Unlock()
}

// closed is called once when a connection closes or leaves the registry.
func (a *admission) closed(ip netip.Addr) {
	a.mu.Lock()
	if c := a.perIP[ip]; c != nil {
		c.open--
		if c.open <= 0 {
			delete(a.perIP, ip)
		}
	}
	a.mu.Unlock()
}

// stillSniffing is the number of connections being classified.
func (a *admission) stillSniffing() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sniffing
}
