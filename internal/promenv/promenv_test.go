package promenv_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gpubot/gpubot/internal/promenv"
)

// The server scrapes a target and answers a query about what it scraped.
func TestStartScrapesAndAnswers(t *testing.T) {
	exporter := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "# TYPE promenv_test_value gauge")
		fmt.Fprintln(w, "promenv_test_value 42")
	}))
	defer exporter.Close()
	srv := promenv.Start(t, promenv.Options{Targets: []string{strings.TrimPrefix(exporter.URL, "http://")}, ScrapeInterval: time.Second})
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(srv.URL + "/api/v1/query?query=promenv_test_value")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), `"42"`) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sample after 20 s; last answer: %s", body)
		}
		time.Sleep(200 * time.Millisecond) // waiting on Prometheus's own scrape clock
	}
}

func TestPromtoolRuns(t *testing.T) {
	out, err := exec.Command(promenv.Promtool(t), "--version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "promtool") {
		t.Fatalf("promtool --version: %v\n%s", err, out)
	}
}
