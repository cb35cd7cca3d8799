package gateway

import (
	"net"
	"testing"
)

// TestUDPDatagramsClassified: the UDP side of the shared port takes
// datagrams and sorts them into CoAP, the reliable-UDP core and unknown.
func TestUDPDatagramsClassified(t *testing.T) {
	g := startGateway(t, testConfig(t), Options{})
	c, err := net.Dial("udp", g.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	coapGet := []byte{0x40, 0x01, 0x12, 0x34, 0xb4, 't', 'e', 'm', 'p'} // CON GET /temp
	rudp := append([]byte{0xE3, 0x55}, make([]byte, 14)...)
	for range 3 {
		c.Write(coapGet)
	}
	c.Write(rudp)
	c.Write([]byte("hello?"))
	eventually(t, "datagram counts", func() bool {
		m := httpGet(t, g, "/metrics")
		return metric(m, `edgemux_datagrams_total{class="coap"}`) == "3" &&
			metric(m, `edgemux_datagrams_total{class="rudp"}`) == "1" &&
			metric(m, `edgemux_datagrams_total{class="unknown"}`) == "1"
	})
}
