package health

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// ReportLimit bounds the JSON of the results of one Report. etcd refuses a
// request over 1.5 MiB (its default --max-request-bytes), so a Report
// larger than that can never be stored: a namespace of 3,000 workloads
// with two constraints each needs about 2 MiB. A third of the limit leaves
// room for the metadata, and keeps the rewrite of a changed Report small.
const ReportLimit = 512 << 10

// maxShards bounds the split; a namespace would need 2 GiB of results to
// reach it.
const maxShards = 1 << 12

// Shards splits rep into Reports whose results take at most limit bytes of
// JSON, by object name: rep itself, named ReportName, when it fits; else n
// shards, n the smallest power of two that fits, the results of each
// workload in the shard its kind and name hash to. A workload thus keeps
// its shard while n stays, and a change to it rewrites that shard alone.
// Shard 0 is named ReportName and shard i ReportName-i; an empty shard is
// left out. Each shard's summary counts its own results, in rep's order.
// No split bounds a workload whose own results outgrow limit: Shards then
// returns an error naming it.
func Shards(rep *Report, limit int) (map[string]*Report, error) {
	// The results of one workload are contiguous: Reports sorts them by
	// workload.
	var ws []shardedWorkload
	total := 0
	for i := 0; i < len(rep.Results); {
		j := i + 1
		for j < len(rep.Results) && sameResource(&rep.Results[i], &rep.Results[j]) {
			j++
		}
		w := shardedWorkload{results: rep.Results[i:j]}
		for k := range w.results {
			data, err := json.Marshal(&w.results[k])
			if err != nil {
				return nil, fmt.Errorf("encoding a result of %s: %w", resourceKey(&w.results[k]), err)
			}
			w.size += len(data) + 1 // and its comma
		}
		h := fnv.New32a()
		_, _ = h.Write([]byte(resourceKey(&rep.Results[i])))
		w.hash = h.Sum32()
		ws = append(ws, w)
		total += w.size
		i = j
	}
	if total <= limit {
		return map[string]*Report{ReportName: rep}, nil
	}
	for _, w := range ws {
		// No split can bound a workload whose own results outgrow a Report.
		if w.size > limit {
			return nil, fmt.Errorf("the results of %s take %d bytes, over a Report's %d", resourceKey(&w.results[0]), w.size, limit)
		}
	}
	n := uint32(2)
	for ; !fitsIn(n, ws, limit); n *= 2 {
		if n == maxShards {
			return nil, fmt.Errorf("%d bytes of results do not fit %d Reports of %d", total, maxShards, limit)
		}
	}
	out := map[string]*Report{}
	for _, w := range ws {
		name := shardName(int(w.hash % n))
		shard := out[name]
		if shard == nil {
			shard = &Report{Source: rep.Source}
			out[name] = shard
		}
		for _, r := range w.results {
			shard.add(r)
		}
	}
	return out, nil
}

// shardedWorkload is the results of one workload, their size in JSON and
// the hash that picks their shard.
type shardedWorkload struct {
	results []ReportResult
	size    int
	hash    uint32
}

// fitsIn reports whether n shards hold ws with none over limit.
func fitsIn(n uint32, ws []shardedWorkload, limit int) bool {
	sizes := make([]int, n)
	for _, w := range ws {
		if sizes[w.hash%n] += w.size; sizes[w.hash%n] > limit {
			return false
		}
	}
	return true
}

func shardName(i int) string {
	if i == 0 {
		return ReportName
	}
	return ReportName + "-" + strconv.Itoa(i)
}

func sameResource(a, b *ReportResult) bool {
	return a.Resources[0].Kind == b.Resources[0].Kind && a.Resources[0].Name == b.Resources[0].Name
}

func resourceKey(r *ReportResult) string { return r.Resources[0].Kind + "/" + r.Resources[0].Name }

// domainsTextLimit bounds a result's domains property: a constraint over
// kubernetes.io/hostname of a workload with thousands of replicas, named
// node by node, would alone outgrow a Report.
const domainsTextLimit = 4 << 10

// boundedDomains returns text ("a=3,b=0,...") cut at a domain within
// domainsTextLimit bytes, saying how many domains it leaves out.
func boundedDomains(text string) string {
	if len(text) <= domainsTextLimit {
		return text
	}
	cut := strings.LastIndexByte(text[:domainsTextLimit-32], ',')
	if cut < 0 {
		cut = 0
	}
	more := strings.Count(text[cut:], ",")
	if cut == 0 {
		more++
	}
	return fmt.Sprintf("%s and %d more", text[:cut], more)
}
