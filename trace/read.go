package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// ErrTruncated is wrapped by ReadFile's error when the trace ends before
// its JSON does (its writer was killed mid-write); the File returned with
// it holds what was read before the cut.
var ErrTruncated = errors.New("trace: cut short")

// ReadFile decodes a Chrome trace in the object form. Numbers in events'
// args are kept as json.Number, so that 64-bit ids pass through exactly.
// A trace cut short yields the events before the cut and an error
// wrapping ErrTruncated; any other malformed input yields an error and no
// File.
func ReadFile(r io.Reader) (*File, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	f := &File{TraceEvents: []ChromeEvent{}}
	err := readObject(dec, f)
	switch {
	case err == nil:
		return f, nil
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return f, fmt.Errorf("%w after %d events: %w", ErrTruncated, len(f.TraceEvents), err)
	}
	return nil, fmt.Errorf("trace: read: %w", err)
}

// readObject reads the top-level object into f, key by key, so that what
// precedes a cut is kept.
func readObject(dec *json.Decoder, f *File) error {
	if err := expect(dec, json.Delim('{')); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		switch key {
		case "traceEvents":
			err = readEvents(dec, f)
		case "otherData":
			err = dec.Decode(&f.OtherData)
		case "displayTimeUnit":
			err = dec.Decode(&f.DisplayTimeUnit)
		default:
			var skip json.RawMessage
			err = dec.Decode(&skip)
		}
		if err != nil {
			return err
		}
	}
	return expect(dec, json.Delim('}'))
}

// readEvents reads the events' array, one event at a time.
func readEvents(dec *json.Decoder, f *File) error {
	if err := expect(dec, json.Delim('[')); err != nil {
		return err
	}
	for dec.More() {
		var e ChromeEvent
		if err := dec.Decode(&e); err != nil {
			return err
		}
		f.TraceEvents = append(f.TraceEvents, e)
	}
	return expect(dec, json.Delim(']'))
}

// expect reads the next token, which must be want.
func expect(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return fmt.Errorf("want %q, got %v", want, tok)
	}
	return nil
}
