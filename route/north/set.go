package north

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"

	"github.com/edgemux/edgemux/config"
	"github.com/edgemux/edgemux/route/bus"
)

// OpenStore opens a sink's store from its configuration; nil means
// OpenSpool.
type OpenStore func(cfg config.NorthStore) (Store, error)

// Set is every configured sink.
type Set struct {
	sinks []*Sink
}

// Build makes the sinks of cfg on bus b, opening stores with open where a
// sink has store.enabled, and starts nothing. gateway fills {gateway} in
// templates. An empty cfg makes an empty Set that does nothing.
func Build(cfg config.North, gateway string, b *bus.Bus, open OpenStore, log *slog.Logger) (*Set, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	set := &Set{}
	for _, sc := range cfg.Sinks {
		s, err := buildSink(sc, gateway, b, open, log)
		if err != nil {
			set.Close()
			return nil, fmt.Errorf("north: sink %s: %w", sc.Name, err)
		}
		set.sinks = append(set.sinks, s)
	}
	return set, nil
}

func buildSink(sc config.NorthSink, gateway string, b *bus.Bus, open OpenStore, log *slog.Logger) (*Sink, error) {
	up, err := uplink(sc, gateway, log.With("sink", sc.Name))
	if err != nil {
		return nil, err
	}
	var store Store
	if sc.Store.Enabled {
		if open == nil {
			open = OpenSpool
		}
		if store, err = open(sc.Store); err != nil {
			return nil, fmt.Errorf("store %s: %w", sc.Store.Dir, err)
		}
	}
	s, err := NewSink(sc, gateway, b, up, store, log)
	if err != nil && store != nil {
		store.Close()
	}
	return s, err
}

// uplink makes the engine a sink's kind names.
func uplink(sc config.NorthSink, gateway string, log *slog.Logger) (Uplink, error) {
	if sc.Kind == "nats" {
		no, err := natsOptions(sc, gateway)
		no.Log = log
		return NewNATS(no), err
	}
	mo, err := mqttOptions(sc, gateway)
	mo.Log = log
	return NewMQTT(mo), err
}

// natsOptions reads a NATS sink's password and certificates.
func natsOptions(sc config.NorthSink, gateway string) (NATSOptions, error) {
	o := NATSOptions{URL: sc.URL, Name: sc.ClientID, Username: sc.Username, Stream: sc.JetStream.Stream,
		State: strings.ReplaceAll(sc.Will.Topic, "{gateway}", gateway), Online: sc.Will.Online, Offline: sc.Will.Payload}
	var err error
	if o.Password, err = readPassword(sc.PasswordFile); err != nil {
		return o, err
	}
	if u, err := url.Parse(sc.URL); err == nil && u.Scheme == "tls" {
		o.TLS, err = tlsConfig(sc.TLS, u.Hostname())
		return o, err
	}
	return o, nil
}

func readPassword(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	pw, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("password_file: %w", err)
	}
	return strings.TrimRight(string(pw), "\r\n"), nil
}

// mqttOptions reads a sink's password and certificates; {gateway} in the
// will topic is the gateway's name.
func mqttOptions(sc config.NorthSink, gateway string) (MQTTOptions, error) {
	o := MQTTOptions{URL: sc.URL, ClientID: sc.ClientID, CleanSession: sc.CleanSession, KeepAlive: sc.KeepAlive,
		Username: sc.Username, WillTopic: strings.ReplaceAll(sc.Will.Topic, "{gateway}", gateway), WillPayload: sc.Will.Payload, Online: sc.Will.Online,
		WillQoS: byte(sc.Will.QoS), WillRetain: sc.Will.Retain}
	var err error
	if o.Password, err = readPassword(sc.PasswordFile); err != nil {
		return o, err
	}
	u, err := url.Parse(sc.URL)
	if err != nil {
		return o, err
	}
	if u.Scheme == "ssl" || u.Scheme == "tls" || u.Scheme == "mqtts" {
		if o.TLS, err = tlsConfig(sc.TLS, u.Hostname()); err != nil {
			return o, err
		}
	}
	return o, nil
}

// tlsConfig builds the client side of a TLS connection to the broker.
func tlsConfig(c config.NorthTLS, host string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if tc.ServerName == "" {
		tc.ServerName = host
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.ca_file: %w", err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tls.ca_file %s: no PEM certificate in it", c.CAFile)
		}
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("tls.cert_file: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Start starts every sink.
func (s *Set) Start() {
	for _, k := range s.sinks {
		k.Start()
	}
}

// Close stops every sink (announcing the gateway offline) and closes
// their stores.
func (s *Set) Close() error {
	var errs []error
	for _, k := range s.sinks {
		errs = append(errs, k.Close())
	}
	return errors.Join(errs...)
}

// Stats are the sinks' stats, in configuration order.
func (s *Set) Stats() []Stats {
	out := make([]Stats, 0, len(s.sinks))
	for _, k := range s.sinks {
		out = append(out, k.Stats())
	}
	return out
}

// Names are the sinks' names, in configuration order.
func (s *Set) Names() []string {
	out := make([]string, 0, len(s.sinks))
	for _, k := range s.sinks {
		out = append(out, k.name)
	}
	return out
}
