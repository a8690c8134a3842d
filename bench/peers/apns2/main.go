// apns2-peer: the Go peer of bench/run h2engine (issue 33).  It pushes N
// notifications with github.com/sideshow/apns2 (the APNs library gorush
// uses) to one endpoint, normally the nghttpd that herald's engine
// (bench/h2push.c) and h2load are measured against, with the same body,
// the same headers (a provider token, apns-topic, apns-push-type,
// apns-priority, a fresh apns-id) and the same streams in flight: STREAMS
// goroutines spread over CLIENTS clients (each apns2 client keeps one
// HTTP/2 connection), each pushing the next notification once its last
// is answered.  Prints one JSON object like herald-bench-h2push's:
// pushes, ok, failed, seconds, pushes_per_s, cpu_s, cpu_us_per_push (this
// process, user + system, from the first push to the last answer).
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sideshow/apns2"
	"github.com/sideshow/apns2/token"
	"golang.org/x/net/http2"
)

func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func fail(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "apns2-peer: "+format+"\n", args...)
	os.Exit(2)
}

// newClient is an apns2 token client for url whose peer is verified
// against the CAs in pool.
func newClient(url string, tok *token.Token, pool *x509.CertPool) *apns2.Client {
	c := apns2.NewTokenClient(tok)
	c.Host = url
	c.HTTPClient.Transport.(*http2.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
	return c
}

func main() {
	url := flag.String("url", "", "the endpoint, https://HOST:PORT")
	caFile := flag.String("ca", "", "PEM CAs that verify the endpoint")
	bodyFile := flag.String("body", "", "the notification's JSON payload")
	device := flag.String("device", "", "the device token (hex)")
	topic := flag.String("topic", "org.herald.bench", "apns-topic")
	keyFile := flag.String("key", "", "the .p8 key that signs the provider token")
	keyID := flag.String("key-id", "", "the key's id (10 characters)")
	teamID := flag.String("team-id", "", "the team id (10 characters)")
	n := flag.Int("n", 100000, "notifications")
	streams := flag.Int("streams", 100, "goroutines, each with one push in flight")
	clients := flag.Int("clients", 1, "apns2 clients (one HTTP/2 connection each)")
	flag.Parse()
	if *url == "" || *caFile == "" || *bodyFile == "" || *device == "" || *keyFile == "" ||
		*n < 1 || *streams < 1 || *clients < 1 {
		flag.Usage()
		os.Exit(2)
	}
	pem, err := os.ReadFile(*caFile)
	if err != nil {
		fail("%v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		fail("no certificate in %s", *caFile)
	}
	payload, err := os.ReadFile(*bodyFile)
	if err != nil {
		fail("%v", err)
	}
	key, err := token.AuthKeyFromFile(*keyFile)
	if err != nil {
		fail("%s: %v", *keyFile, err)
	}
	tok := &token.Token{AuthKey: key, KeyID: *keyID, TeamID: *teamID}
	cs := make([]*apns2.Client, *clients)
	for i := range cs {
		cs[i] = newClient(*url, tok, pool)
	}

	var next, ok, failed int64
	var lastErr atomic.Value
	var wg sync.WaitGroup
	wall0, cpu0 := time.Now(), cpuSeconds()
	for g := 0; g < *streams; g++ {
		wg.Add(1)
		go func(c *apns2.Client) {
			defer wg.Done()
			for {
				i := atomic.AddInt64(&next, 1)
				if i > int64(*n) {
					return
				}
				note := &apns2.Notification{
					DeviceToken: *device,
					Topic:       *topic,
					Payload:     payload,
					PushType:    apns2.PushTypeAlert,
					Priority:    apns2.PriorityHigh,
					ApnsID:      fmt.Sprintf("%08x-0000-4000-8000-%012x", i>>48, i&0xffffffffffff),
				}
				res, err := c.PushWithContext(context.Background(), note)
				if err == nil && res.StatusCode == http.StatusOK {
					atomic.AddInt64(&ok, 1)
					continue
				}
				atomic.AddInt64(&failed, 1)
				if err != nil {
					lastErr.Store(err.Error())
				} else {
					lastErr.Store(fmt.Sprintf("status %d %s", res.StatusCode, res.Reason))
				}
			}
		}(cs[g%len(cs)])
	}
	wg.Wait()
	wall := time.Since(wall0).Seconds()
	cpu := cpuSeconds() - cpu0
	done := ok + failed
	out, _ := json.Marshal(map[string]interface{}{
		"pushes": done, "ok": ok, "failed": failed, "connections": *clients,
		"streams": *streams, "seconds": wall, "pushes_per_s": float64(done) / wall,
		"cpu_s": cpu, "cpu_us_per_push": cpu * 1e6 / float64(done),
	})
	fmt.Println(string(out))
	if failed > 0 {
		fmt.Fprintf(os.Stderr, "apns2-peer: %d failed, the last: %v\n", failed, lastErr.Load())
		os.Exit(1)
	}
}
