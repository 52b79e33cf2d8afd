package deletioncost

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWritesTakeTheLowestCostFirst(t *testing.T) {
	type want struct {
		pod  string
		cost int32
	}
	tests := []struct {
		name  string
		wants []want
		order []string
	}{
		{
			name:  "the pods of a zone queued bottom first (-2 -4 -6 -8) -> written top first, as a scale-down takes them",
			wants: []want{{"a1", -2}, {"a2", -4}, {"a3", -6}, {"a4", -8}},
			order: []string{"a4", "a3", "a2", "a1"},
		},
		{
			name:  "two zones' tops at -8 -> in the order they were queued, then the next layer",
			wants: []want{{"b4", -8}, {"a4", -8}, {"a3", -6}, {"b3", -6}},
			order: []string{"b4", "a4", "a3", "b3"},
		},
		{
			name:  "a queued pod's cost changed while it waits -> it keeps its place",
			wants: []want{{"a1", -2}, {"a2", -4}, {"a1", -10}},
			order: []string{"a2", "a1"},
		},
		{
			name:  "ten pods queued in no order -> written by cost",
			wants: []want{{"p5", -5}, {"p1", -1}, {"p9", -9}, {"p3", -3}, {"p7", -7}, {"p2", -2}, {"p8", -8}, {"p4", -4}, {"p6", -6}, {"p10", -10}},
			order: []string{"p10", "p9", "p8", "p7", "p6", "p5", "p4", "p3", "p2", "p1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWrites(1000, 1000)
			for _, x := range tt.wants {
				w.want(podKey{"default", x.pod}, x.cost)
			}
			var got []string
			for w.queue.Len() > 0 {
				key, _ := w.queue.Get()
				got = append(got, key.name)
				w.queue.Done(key)
			}
			if diff := cmp.Diff(tt.order, got); diff != "" {
				t.Errorf("writes taken (-want +got):\n%s", diff)
			}
		})
	}
}
