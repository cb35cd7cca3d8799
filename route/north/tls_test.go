package north

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/route/bus"
	"github.com/edgemux/edgemux/route/north/northtest"
	"github.com/edgemux/edgemux/route/routetest"
)

// testPKI is a CA, a server certificate for 127.0.0.1 and a client
// certificate, as PEM files in a temp dir.
type testPKI struct {
	dir                                  string
	ca, serverCert, serverKey, cert, key string
}

func newPKI(t *testing.T) testPKI {
	t.Helper()
	p := testPKI{dir: t.TempDir()}
	caKey, caCert, caDER := newCert(t, nil, nil, &x509.Certificate{
		Subject: pkix.Name{CommonName: "edgemux test CA"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature})
	p.ca = p.write(t, "ca.pem", "CERTIFICATE", caDER)
	sKey, _, sDER := newCert(t, caCert, caKey, &x509.Certificate{
		Subject: pkix.Name{CommonName: "broker"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature})
	p.serverCert = p.write(t, "server.pem", "CERTIFICATE", sDER)
	p.serverKey = p.writeKey(t, "server.key", sKey)
	cKey, _, cDER := newCert(t, caCert, caKey, &x509.Certificate{
		Subject: pkix.Name{CommonName: "gateway"}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		KeyUsage: x509.KeyUsageDigitalSignature})
	p.cert = p.write(t, "client.pem", "CERTIFICATE", cDER)
	p.key = p.writeKey(t, "client.key", cKey)
	return p
}

var serial int64

func newCert(t *testing.T, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, tmpl *x509.Certificate) (*ecdsa.PrivateKey, *x509.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial++
	tmpl.SerialNumber = big.NewInt(serial)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert, der
}

func (p testPKI) write(t *testing.T, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func (p testPKI) writeKey(t *testing.T, name string, key *ecdsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return p.write(t, name, "EC PRIVATE KEY", der)
}

// TestMQTTTLSClientCert: a sink reaches a broker that requires a client
// certificate, checking the broker's against the configured CA.
func TestMQTTTLSClientCert(t *testing.T) {
	p := newPKI(t)
	br := northtest.StartMosquitto(t, "cafile "+p.ca+"\ncertfile "+p.serverCert+"\nkeyfile "+p.serverKey+"\nrequire_certificate true\n")
	b := bus.New(bus.Options{})
	s := startSink(t, config.NorthSink{Name: "tls", Kind: "mqtt", URL: "ssl://127.0.0.1:" + itoa(br.Port),
		TLS: config.NorthTLS{CAFile: p.ca, CertFile: p.cert, KeyFile: p.key},
		Map: []config.NorthMap{{From: "x/#", To: "tls/{topic}", QoS: 1}}}, b, nil)
	waitUp(t, s)
	tc, err := tlsConfig(config.NorthTLS{CAFile: p.ca, CertFile: p.cert, KeyFile: p.key}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := subscribe(t, "ssl://127.0.0.1:"+itoa(br.Port), "t-tls", "tls/#", true, func(o *mqtt.ClientOptions) { o.SetTLSConfig(tc) })
	must(t, b.Publish("x/y", []byte("secret"), "ws"))
	routetest.Eventually(t, "the message over TLS", func() bool { return got.len() == 1 })
	if m := got.snapshot()[0]; m.Topic() != "tls/x/y" || string(m.Payload()) != "secret" {
		t.Fatalf("got %s %q", m.Topic(), m.Payload())
	}

	// Without a client certificate the broker turns the handshake down.
	conn, err := tls.Dial("tcp", "127.0.0.1:"+itoa(br.Port), &tls.Config{RootCAs: tc.RootCAs, ServerName: "127.0.0.1"})
	if err == nil {
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil {
		t.Fatal("a client without a certificate got through")
	}
}
