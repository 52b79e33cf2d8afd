package workload

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestDeletionCost(t *testing.T) {
	cases := []struct {
		name    string
		value   *string // nil: no annotation
		want    int32
		wantErr bool
	}{
		{name: "no annotation is cost 0, not an error"},
		{name: "a positive cost", value: new("5"), want: 5},
		{name: "a negative cost", value: new("-8"), want: -8},
		{name: "zero", value: new("0"), want: 0},
		{name: "-0 starts with a minus sign and parses to 0", value: new("-0"), want: 0},
		{name: "-007: after a minus sign leading zeros pass, as upstream's check reads only the first byte", value: new("-007"), want: -7},
		{name: "int32's highest", value: new("2147483647"), want: 2147483647},
		{name: "int32's lowest", value: new("-2147483648"), want: -2147483648},
		{name: "a plus sign is invalid though strconv takes it", value: new("+5"), wantErr: true},
		{name: "a leading zero is invalid though strconv takes it", value: new("007"), wantErr: true},
		{name: "one past int32's highest overflows", value: new("2147483648"), wantErr: true},
		{name: "one past int32's lowest overflows", value: new("-2147483649"), wantErr: true},
		{name: "an int64 overflows", value: new("9223372036854775808"), wantErr: true},
		{name: "empty", value: new(""), wantErr: true},
		{name: "a leading space", value: new(" 5"), wantErr: true},
		{name: "a trailing space", value: new("5 "), wantErr: true},
		{name: "only a space", value: new(" "), wantErr: true},
		{name: "a minus sign alone", value: new("-"), wantErr: true},
		{name: "hexadecimal", value: new("0x10"), wantErr: true},
		{name: "a word", value: new("high"), wantErr: true},
		{name: "a decimal fraction", value: new("1.5"), wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			annotations := map[string]string{"other": "1"}
			if c.value != nil {
				annotations[v1.PodDeletionCost] = *c.value
			}
			got, err := DeletionCost(annotations)
			if got != c.want || (err != nil) != c.wantErr {
				t.Errorf("DeletionCost(%v) = %d, %v; want %d, error %v", c.value, got, err, c.want, c.wantErr)
			}
		})
	}
}
