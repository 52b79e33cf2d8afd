package lookup

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/spreadguard/spreadguard/pkg/cache"
)

// listKind is `kind: List, apiVersion: v1`, what `kubectl get -o yaml`
// writes for more than one object.
var listKind = v1.SchemeGroupVersion.WithKind("List")

// wantKinds lists the kinds a cluster file may hold, for errors.
var wantKinds = func() string {
	names := make([]string, len(cache.InformedKinds))
	for i, k := range cache.InformedKinds {
		names[i] = k.GVK.Kind
	}
	return strings.Join(names, ", ") + ", or a v1 List"
}()

// Error is a problem with one document of a cluster file: its message names the
// file, the document and, inside a List, the item.
type Error struct {
	// File is the name given to Decode, or the path given to Load.
	File string
	// Document is the 1-based position of the document among the file's
	// non-empty documents.
	Document int
	// Item is the 0-based index in the items of a List, or -1.
	Item int
	Err  error
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: document %d: ", e.File, e.Document)
	if e.Item >= 0 {
		fmt.Fprintf(&b, "items[%d]: ", e.Item)
	}
	b.WriteString(e.Err.Error())
	return oneLine(b.String())
}

func (e *Error) Unwrap() error { return e.Err }

// oneLine joins a multi-line message (YAML parsers report some errors that
// way) so that a command prints exactly one line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// Load reads the cluster file at path; see Decode.
func Load(path string) (*Store, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError already reads "open PATH: reason".
	}
	defer f.Close()
	return Decode(path, f)
}

// Decode reads a cluster file from r: a multi-document YAML file, a stream of
// JSON objects, or a v1 List, of the kinds in cache.InformedKinds.
// Decoding is strict: an unknown or duplicate field, an unknown kind, a
// missing apiVersion or kind, a missing name and two objects with the same
// kind and name are errors. name labels the errors, e.g. the file name; the
// first error is returned, as an *Error when it is about one document.
func Decode(name string, r io.Reader) (*Store, error) {
	docs, err := decodeObjects(name, r)
	if err != nil {
		return nil, err
	}
	s := newStore()
	for _, d := range docs {
		if err := s.add(d.obj); err != nil {
			return nil, &Error{File: name, Document: d.document, Item: d.item, Err: err}
		}
	}
	return s, nil
}

// LoadPod reads the file at path, which must hold exactly one Pod; see
// DecodePod.
func LoadPod(path string) (*v1.Pod, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return DecodePod(path, f)
}

// DecodePod reads exactly one Pod from r, decoded as strictly as Decode
// does. A pod without a namespace is put in "default", as kubectl does. A
// pod about to be created may have only metadata.generateName.
func DecodePod(name string, r io.Reader) (*v1.Pod, error) {
	docs, err := decodeObjects(name, r)
	if err != nil {
		return nil, err
	}
	if len(docs) != 1 {
		return nil, fmt.Errorf("%s: want exactly one Pod, found %d objects", name, len(docs))
	}
	pod, ok := docs[0].obj.(*v1.Pod)
	if !ok {
		kind, _ := cache.KindOf(docs[0].obj)
		return nil, fmt.Errorf("%s: want exactly one Pod, found a %s", name, kind.GVK.Kind)
	}
	if pod.Name == "" && pod.GenerateName == "" {
		return nil, &Error{File: name, Document: docs[0].document, Item: docs[0].item,
			Err: errors.New("pod has neither metadata.name nor metadata.generateName")}
	}
	if pod.Namespace == "" {
		pod.Namespace = metav1.NamespaceDefault
	}
	return pod, nil
}

// document is one decoded object and where it was found.
type document struct {
	obj      runtime.Object
	document int
	item     int
}

// decodeObjects splits r into documents and decodes each strictly, opening
// v1 Lists into their items.
func decodeObjects(name string, r io.Reader) ([]document, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	raws, err := splitDocuments(data)
	var out []document
	for i, raw := range raws {
		n := i + 1
		obj, items, derr := decodeDocument(raw)
		if derr != nil {
			return nil, &Error{File: name, Document: n, Item: -1, Err: derr}
		}
		if obj != nil {
			out = append(out, document{obj: obj, document: n, item: -1})
			continue
		}
		for j, item := range items {
			obj, nested, derr := decodeDocument(item)
			if derr == nil && obj == nil {
				derr = fmt.Errorf("a List inside a List is not supported (%d items)", len(nested))
			}
			if derr != nil {
				return nil, &Error{File: name, Document: n, Item: j, Err: derr}
			}
			out = append(out, document{obj: obj, document: n, item: j})
		}
	}
	// A splitting error comes after the documents that did split, so it is
	// reported with the number of the document that broke.
	if err != nil {
		return nil, &Error{File: name, Document: len(raws) + 1, Item: -1, Err: err}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no objects found", name)
	}
	return out, nil
}

// splitDocuments returns the non-empty documents of data as JSON. Data that
// starts with '{' is a stream of JSON objects; anything else is YAML
// documents separated by "---" lines. A document with only comments or
// whitespace is not a document.
func splitDocuments(data []byte) ([][]byte, error) {
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		return splitJSON(data)
	}
	var out [][]byte
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		// Strict conversion refuses duplicate keys, which plain YAML
		// parsing would silently resolve to the last one.
		js, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return out, fmt.Errorf("error converting YAML to JSON: %w", err)
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || string(t) == "null" {
			continue
		}
		out = append(out, js)
	}
}

func splitJSON(data []byte) ([][]byte, error) {
	var out [][]byte
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			var syn *json.SyntaxError
			if errors.As(err, &syn) {
				return out, fmt.Errorf("invalid JSON at line %d: %w", lineAt(data, syn.Offset), err)
			}
			return out, fmt.Errorf("invalid JSON: %w", err)
		}
		out = append(out, raw)
	}
}

func lineAt(data []byte, offset int64) int {
	if offset > int64(len(data)) {
		offset = int64(len(data))
	}
	return bytes.Count(data[:offset], []byte("\n")) + 1
}

// decodeDocument decodes one JSON document into a typed object, or, for a
// v1 List, returns its raw items.
func decodeDocument(js []byte) (runtime.Object, []json.RawMessage, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(js, &probe); err != nil {
		return nil, nil, fmt.Errorf("want an object with apiVersion and kind, got %s", jsonType(js))
	}
	var tm metav1.TypeMeta
	for field, dst := range map[string]*string{"apiVersion": &tm.APIVersion, "kind": &tm.Kind} {
		if raw, ok := probe[field]; ok {
			if err := json.Unmarshal(raw, dst); err != nil {
				return nil, nil, fmt.Errorf("%s must be a string, got %s", field, jsonType(raw))
			}
		}
	}
	if tm.Kind == "" {
		return nil, nil, errors.New("missing kind")
	}
	gv, err := schema.ParseGroupVersion(tm.APIVersion)
	if err != nil {
		return nil, nil, fmt.Errorf("kind %q: invalid apiVersion %q: %w", tm.Kind, tm.APIVersion, err)
	}
	gvk := gv.WithKind(tm.Kind)

	if tm.Kind == listKind.Kind {
		if tm.APIVersion != listKind.GroupVersion().String() {
			return nil, nil, fmt.Errorf("kind List has apiVersion %q (want v1)", tm.APIVersion)
		}
		var list struct {
			metav1.TypeMeta `json:",inline"`
			metav1.ListMeta `json:"metadata,omitempty"`
			Items           []json.RawMessage `json:"items"`
		}
		if err := strictUnmarshal(js, &list); err != nil {
			return nil, nil, err
		}
		return nil, list.Items, nil
	}

	var want *schema.GroupVersionKind
	for _, k := range cache.InformedKinds {
		if k.GVK.Kind == tm.Kind {
			want = &k.GVK
		}
	}
	if want == nil {
		return nil, nil, fmt.Errorf("unknown kind %q (want one of %s)", tm.Kind, wantKinds)
	}
	if tm.APIVersion == "" {
		return nil, nil, fmt.Errorf("kind %q: missing apiVersion (want %s)", tm.Kind, want.GroupVersion())
	}
	if gvk != *want {
		return nil, nil, fmt.Errorf("kind %q: unsupported apiVersion %q (want %s)", tm.Kind, tm.APIVersion, want.GroupVersion())
	}
	kind, _ := cache.KindFor(gvk)
	obj := kind.New()
	unmarshal := strictUnmarshal
	if kind.Partial {
		// Its Go type holds only what spreadguard reads: the other fields
		// of a real object are expected, not typos.
		unmarshal = func(js []byte, into any) error { return kjson.UnmarshalCaseSensitivePreserveInts(js, into) }
	}
	if err := unmarshal(js, obj); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return obj, nil, nil
}

// strictUnmarshal decodes as the apiserver does in strict field validation:
// case-sensitive field names, no unknown and no duplicate fields.
func strictUnmarshal(js []byte, into any) error {
	strict, err := kjson.UnmarshalStrict(js, into)
	if err != nil {
		return err
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return errors.New(strings.Join(msgs, "; "))
	}
	return nil
}

func jsonType(raw []byte) string {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "an object"
	case '[':
		return "a list"
	case '"':
		return "a string " + strconv.Quote(string(bytes.Trim(t, `"`)))
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}
