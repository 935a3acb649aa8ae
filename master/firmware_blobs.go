package master

// firmwareManifest indexes the build at path for the chunk transport
// (master/blobs: its chunks are served by BlobGet from now on, hashed
// again when its size or time change) and returns its manifest as a job
// carries it ({"size", "sha256", "chunks"}).
func (m *Master) firmwareManifest(path string) (map[string]any, error) {
	man, err := m.blobs.Add(path)
	if err != nil {
		return nil, err
	}
	return man.Any(), nil
}
