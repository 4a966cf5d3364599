package main

import "testing"

func TestLowerCamel(t *testing.T) {
	for in, want := range map[string]string{
		"Foo": "foo", "URL": "url", "IDMS": "idms", "HTTPClient": "httpClient", "IDs": "ids",
		"URLsFor": "urlsFor", "SHA256Sum": "sha256Sum", "S3Client": "s3Client", "GiB": "giB",
		"FileIDMS": "fileIDMS", "ReferrersSBOM": "referrersSBOM", "OK": "ok", "CDNHost": "cdnHost",
		"SPDXMediaType": "spdxMediaType", "X": "x",
	} {
		if got := lowerCamel(in); got != want {
			t.Errorf("lowerCamel(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReplaceWord(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"`archive.FormatVersion` = 3", "`archive.formatVersion` = 3"},
		{"imageset.SetFormatVersion", "imageset.SetFormatVersion"},
		{"x.archive.FormatVersion", "x.archive.FormatVersion"},
		{"archive.FormatVersions", "archive.FormatVersions"},
	} {
		if got := replaceWord(c.in, "archive.FormatVersion", "archive.formatVersion"); got != c.want {
			t.Errorf("replaceWord(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
