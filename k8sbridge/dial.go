package k8sbridge

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	kueueclient "sigs.k8s.io/kueue/client-go/clientset/versioned"
)

// Connection says how to reach the API server.
type Connection struct {
	// Kubeconfig is a kubeconfig file's path ("" for none).
	Kubeconfig string
	// InCluster uses the pod's ServiceAccount.
	InCluster bool
	// Observe, if set, is told the duration and status code of every API
	// call (0 when it failed before an answer).
	Observe func(method string, code int, d time.Duration)
}

// ErrNoCluster is returned by Dial when no way to reach a cluster is given.
var ErrNoCluster = errors.New("no Kubernetes cluster configured")

// Dial builds the bridge's clients for the connection and returns a new
// Bridge. It does not contact the server; Start does.
func Dial(conn Connection, cfg Config, opts ...Option) (*Bridge, error) {
	var rc *rest.Config
	var err error
	switch {
	case conn.InCluster:
		rc, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("reading the in-cluster Kubernetes configuration: %w", err)
		}
	case conn.Kubeconfig != "":
		rc, err = clientcmd.BuildConfigFromFlags("", conn.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("reading kubeconfig %s: %w", conn.Kubeconfig, err)
		}
	default:
		return nil, ErrNoCluster
	}
	rc.UserAgent = "gpubot"
	rc.QPS, rc.Burst = 50, 100
	if conn.Observe != nil {
		obs := conn.Observe
		rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				start := time.Now()
				resp, err := rt.RoundTrip(r)
				code := 0
				if resp != nil {
					code = resp.StatusCode
				}
				obs(r.Method, code, time.Since(start))
				return resp, err
			})
		})
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client: %w", err)
	}
	kq, err := kueueclient.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("building the Kueue client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("building the dynamic client: %w", err)
	}
	b, err := New(cfg, kube, kq, append([]Option{WithDynamic(dyn)}, opts...)...)
	if err != nil {
		return nil, err
	}
	b.server = rc.Host
	return b, nil
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
