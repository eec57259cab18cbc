package testenv

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// Scrape reads a metrics endpoint's exposition (GET /metrics on addr,
// within 30 s), failing t unless it answers 200.
func Scrape(t testing.TB, addr string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(Ctx(t, 30*time.Second), http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s: %s", resp.Status, b)
	}
	return string(b)
}
