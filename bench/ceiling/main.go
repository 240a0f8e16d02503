// Command ceiling creates objects through client-go as fast as the API server takes them, with
// no client-side rate limit: the raw ceiling bench/side_by_side.py compares the operators with.
//
// Its input (-objects) is a JSON array of jobs, each an array of
// {"group", "version", "resource", "namespace", "object"}; -clients goroutines each create one
// job's objects in order, one job after another. It prints {"objects": N, "seconds": S}.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
)

type item struct {
	Group     string                 `json:"group"`
	Version   string                 `json:"version"`
	Resource  string                 `json:"resource"`
	Namespace string                 `json:"namespace"`
	Object    map[string]interface{} `json:"object"`
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig path")
	objectsPath := flag.String("objects", "", "JSON file of the jobs' objects")
	clients := flag.Int("clients", 4, "concurrent goroutines")
	flag.Parse()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fail(err)
	}
	config.QPS = -1 // no client-side limit
	client, err := dynamic.NewForConfig(config)
	if err != nil {
		fail(err)
	}
	data, err := os.ReadFile(*objectsPath)
	if err != nil {
		fail(err)
	}
	var jobs [][]item
	if err := json.Unmarshal(data, &jobs); err != nil {
		fail(err)
	}

	work := make(chan []item)
	errs := make(chan error, *clients)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < *clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range work {
				for _, it := range job {
					gvr := schema.GroupVersionResource{Group: it.Group, Version: it.Version, Resource: it.Resource}
					obj := &unstructured.Unstructured{Object: it.Object}
					_, err := client.Resource(gvr).Namespace(it.Namespace).Create(context.Background(), obj, metav1.CreateOptions{})
					if err != nil {
						select {
						case errs <- err:
						default:
						}
						return
					}
				}
			}
		}()
	}
	count := 0
	for _, job := range jobs {
		work <- job
		count += len(job)
	}
	close(work)
	wg.Wait()
	seconds := time.Since(start).Seconds()
	select {
	case err := <-errs:
		fail(err)
	default:
	}
	out, _ := json.Marshal(map[string]interface{}{"objects": count, "seconds": seconds})
	fmt.Println(string(out))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "ceiling:", err)
	os.Exit(1)
}
