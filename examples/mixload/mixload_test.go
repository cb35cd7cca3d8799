package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/gateway/gatewaytest"
)

// startGateway runs an in-process gateway with the mixed benchmark's
// register map until the test ends and returns its address.
func startGateway(t *testing.T) string {
	t.Helper()
	cfg := gatewaytest.Defaults(t)
	cfg.Modbus.NoValue = "zero"
	cfg.Modbus.Tags = []config.ModbusTag{{Topic: "mix/hr0", Table: "holding", Address: 0, Type: "uint16"}}
	return gatewaytest.Start(t, cfg).Addr().String()
}

// TestEveryProtocolAnswers: each protocol's requests get their answers
// from a real gateway, and the result line counts them.
func TestEveryProtocolAnswers(t *testing.T) {
	addr := startGateway(t)
	for _, p := range protos {
		t.Run(p, func(t *testing.T) {
			var out, errOut bytes.Buffer
			args := []string{"-addr", addr, "-proto", p, "-conns", "3", "-rate", "60", "-duration", "500ms", "-start", "10ms"}
			if rc := run(args, &out, &errOut); rc != 0 {
				t.Fatalf("rc %d: %s", rc, errOut.String())
			}
			line := regexp.MustCompile(`(?m)^result .*$`).FindString(out.String())
			sent, ok, errs := field(t, line, "sent"), field(t, line, "ok"), field(t, line, "errors")
			if sent == 0 || ok != sent || errs != 0 {
				t.Errorf("%s", line)
			}
		})
	}
}

// TestModbusExceptionIsAnError: a register with no tag gets exception
// 0x02, which the client counts as an error, not as an answer.
func TestModbusExceptionIsAnError(t *testing.T) {
	addr := startGateway(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dialClient(ctx, options{Addr: addr, Proto: "modbus", Timeout: 10 * time.Second}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if err := c.do(1); err != nil {
		t.Fatalf("tagged register: %v", err)
	}
	m := c.(*modbusClient)
	m.addr = 7 // no tag there
	if err := m.do(2); err == nil {
		t.Fatal("a read of an untagged register counted as answered")
	}
}

func TestHistQuantiles(t *testing.T) {
	var h hist
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {0.999, 999 * time.Microsecond}} {
		got := h.quantile(c.q)
		if got < c.want || float64(got) > float64(c.want)*1.07 {
			t.Errorf("q%.3f = %v, want %v within 7 %%", c.q, got, c.want)
		}
	}
	if h.quantile(1) != 1000*time.Microsecond {
		t.Errorf("max %v", h.quantile(1))
	}
	for i := range 60 * histSub { // up to 2^63 ns: the top buckets overflow int64
		if histIndex(histUpper(i)) != i || i > 0 && histIndex(histUpper(i-1)+1) != i {
			t.Fatalf("bucket %d: bounds do not round-trip", i)
		}
	}
}

func field(t *testing.T, line, key string) int {
	t.Helper()
	m := regexp.MustCompile(`\b` + key + `=(\d+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no %s= in %q", key, line)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}
