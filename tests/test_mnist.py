import gzip

import numpy as np
import pytest

from harness.data import mnist
from harness.errors import HarnessError
from tests.conftest import gzip_idx

TEST_IMAGES = "t10k-images-idx3-ubyte"


def test_shipped_test_split_loads_with_known_label_counts():
    images, labels = mnist.load("test")
    assert images.shape == (10000, 28, 28) and images.dtype == np.uint8
    # counts per digit, from data/mnist/README.md
    assert np.bincount(labels).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def test_to_input_scales_to_unit_range_with_channel_axis():
    x = mnist.to_input(np.array([[[0, 255]]], dtype=np.uint8))
    assert x.shape == (1, 1, 2, 1) and x.dtype == np.float32
    assert x[0, 0, :, 0].tolist() == [0.0, 1.0]


def test_corrupted_file_names_file_and_expected_hash(mnist_copy):
    raw = bytearray(gzip.decompress((mnist_copy / f"{TEST_IMAGES}.gz").read_bytes()))
    raw[5000] ^= 0xFF  # one flipped pixel
    gzip_idx(mnist_copy, TEST_IMAGES, bytes(raw))
    expected = mnist.read_checksums(mnist_copy)[TEST_IMAGES]
    with pytest.raises(HarnessError) as err:
        mnist.load("test", mnist_copy)
    assert TEST_IMAGES in str(err.value) and expected in str(err.value)
    assert "checksum mismatch" in str(err.value)


def test_truncated_gzip_is_reported(mnist_copy):
    path = mnist_copy / f"{TEST_IMAGES}.gz"
    path.write_bytes(path.read_bytes()[:100_000])
    with pytest.raises(HarnessError, match=f"{TEST_IMAGES}.gz: damaged gzip data"):
        mnist.load("test", mnist_copy)


def test_truncated_idx_payload_with_matching_checksum_is_caught_by_header(mnist_copy):
    raw = gzip.decompress((mnist_copy / f"{TEST_IMAGES}.gz").read_bytes())
    gzip_idx(mnist_copy, TEST_IMAGES, raw[:-784], fix_checksum=True)
    with pytest.raises(HarnessError, match="truncated or padded"):
        mnist.load("test", mnist_copy)


def test_missing_file_names_file_and_hash(mnist_copy):
    (mnist_copy / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(HarnessError, match="t10k-labels-idx1-ubyte.gz: missing .expected SHA-256 ff7b"):
        mnist.load("test", mnist_copy)


def test_data_dir_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("LENET_DATA_DIR", str(tmp_path))
    assert mnist.data_dir() == tmp_path
    with pytest.raises(HarnessError, match="SHA256SUMS"):
        mnist.load("test")


def test_bad_idx_type_byte():
    with pytest.raises(HarnessError, match="expected IDX type 0x08"):
        mnist.parse_idx(bytes([0, 0, 0x0D, 1, 0, 0, 0, 1, 0, 0, 0, 0]), "x")
