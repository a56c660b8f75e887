package zk

// Added to go-zookeeper v1.0.4's test package by scripts/compat/go-zookeeper/run.sh: the
// library has no TLS option of its own, so a client reaches a secureClientPort through
// WithDialer and crypto/tls, as its users do. Certificates are made here (crypto/x509): a CA,
// a server certificate for 127.0.0.1 and two client certificates. The server runs from a
// zoo.cfg with a secure client port and PEM stores, through the same zkServer.sh as the
// harness's servers. The x509 id of a client certificate (its subject) guards a node.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

type compatCert struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	der  []byte
}

func compatIssue(t *testing.T, serial int64, subject pkix.Name, issuer *compatCert, server bool) *compatCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	requireNoErrorf(t, err)
	template := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      subject,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	parent, signer := template, key
	if issuer == nil {
		template.IsCA = true
		template.BasicConstraintsValid = true
		template.KeyUsage |= x509.KeyUsageCertSign
	} else {
		parent, signer = issuer.cert, issuer.key
		if server {
			template.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
			template.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		} else {
			template.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, signer)
	requireNoErrorf(t, err)
	cert, err := x509.ParseCertificate(der)
	requireNoErrorf(t, err)
	return &compatCert{cert: cert, key: key, der: der}
}

func (c *compatCert) certPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.der})
}

func (c *compatCert) keyPEM(t *testing.T) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(c.key)
	requireNoErrorf(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

func (c *compatCert) tlsCert() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{c.der}, PrivateKey: c.key}
}

func compatFreePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	requireNoErrorf(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// compatTLSConnect connects over TLS as `client` and waits for the session.
func compatTLSConnect(t *testing.T, addr string, ca *compatCert, client *compatCert) *Conn {
	t.Helper()
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	config := &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", Certificates: []tls.Certificate{client.tlsCert()}}
	dialer := func(network, address string, timeout time.Duration) (net.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, address, config)
	}
	conn, events, err := Connect([]string{addr}, 5*time.Second, WithDialer(dialer))
	requireNoErrorf(t, err)
	deadline := time.After(20 * time.Second)
	for {
		select {
		case e := <-events:
			if e.State == StateHasSession {
				return conn
			}
		case <-deadline:
			conn.Close()
			t.Fatalf("no session over TLS with %s within 20 s", addr)
		}
	}
}

func TestCompatTLSDialer(t *testing.T) {
	dir := t.TempDir()
	ca := compatIssue(t, 1, pkix.Name{CommonName: "go-zookeeper CA"}, nil, false)
	server := compatIssue(t, 2, pkix.Name{CommonName: "server"}, ca, true)
	alice := compatIssue(t, 3, pkix.Name{CommonName: "alice", Organization: []string{"gozk"}}, ca, false)
	bob := compatIssue(t, 4, pkix.Name{CommonName: "bob"}, ca, false)
	write := func(name string, data []byte) string {
		path := filepath.Join(dir, name)
		requireNoErrorf(t, os.WriteFile(path, data, 0o600))
		return path
	}
	keyStore := write("server.pem", append(server.keyPEM(t), server.certPEM()...))
	trustStore := write("ca.pem", ca.certPEM())
	port, securePort := compatFreePort(t), compatFreePort(t)
	cfg := write("zoo.cfg", []byte(fmt.Sprintf(
		"tickTime=500\ndataDir=%s\nclientPort=%d\nclientPortAddress=127.0.0.1\n"+
			"secureClientPort=%d\nsecureClientPortAddress=127.0.0.1\n"+
			"serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory\n"+
			"authProvider.x509=org.apache.zookeeper.server.auth.X509AuthenticationProvider\n"+
			"ssl.keyStore.location=%s\nssl.keyStore.type=PEM\n"+
			"ssl.trustStore.location=%s\nssl.trustStore.type=PEM\n"+
			"admin.enableServer=false\n4lw.commands.whitelist=*\n",
		filepath.Join(dir, "data"), port, securePort, keyStore, trustStore)))
	srv, err := NewIntegrationTestServer(t, cfg, os.Stdout, os.Stderr)
	requireNoErrorf(t, err)
	requireNoErrorf(t, srv.Start())
	defer srv.Stop()
	addr := fmt.Sprintf("127.0.0.1:%d", securePort)
	up := false
	for i := 0; i < 100 && !up; i++ {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			up = true
		} else {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if !up {
		t.Fatalf("the secure client port %s did not open", addr)
	}

	conn := compatTLSConnect(t, addr, ca, alice)
	defer conn.Close()
	id := "CN=alice,O=gozk"
	if _, err := conn.Create("/gozk-tls", []byte("secret"), 0, []ACL{{Perms: PermAll, Scheme: "x509", ID: id}}); err != nil {
		t.Fatalf("create with ACL x509:%s over TLS: %v", id, err)
	}
	data, _, err := conn.Get("/gozk-tls")
	if err != nil || string(data) != "secret" {
		t.Fatalf("get as %s over TLS: %q, %v", id, data, err)
	}
	acl, _, err := conn.GetACL("/gozk-tls")
	if err != nil || len(acl) != 1 || acl[0].Scheme != "x509" || acl[0].ID != id {
		t.Fatalf("getACL: %v, %v", acl, err)
	}
	other := compatTLSConnect(t, addr, ca, bob)
	defer other.Close()
	if _, _, err := other.Get("/gozk-tls"); err != ErrNoAuth {
		t.Fatalf("get as CN=bob over TLS: want ErrNoAuth, got %v", err)
	}
}
