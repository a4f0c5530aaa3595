"""The real data where learners have it: a data set attached to a Kaggle notebook (found on the disk),
kagglehub's attach inside a Kaggle notebook, kagglehub's cache with a token, a folder the learner names; every
refusal one line. Offline: Kaggle's side of kagglehub (its notebook client, its version lookup) is replaced;
kagglehub's own resolvers and cache run as they are."""

import socket

import pytest
from conftest import run_cli
from course_lib.support import kaggle_data, sources
from course_lib.support.errors import CourseLibError
from course_lib.support.outputs import MARKER, folder_kind

SLUG = "jpeg-melanoma-256x256"


@pytest.fixture
def offline(monkeypatch):
    "No connection can be opened: a test that reaches for the network fails."

    def refuse(*args, **kwargs):
        raise AssertionError("a connection was attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)


def _kaggle_layout(folder):
    folder.mkdir(parents=True)
    (folder / "train.csv").write_text("image_name,target\n")
    return folder


def test_no_token_and_nothing_attached_is_one_line_and_writes_nothing(tmp_path, no_kaggle_env, offline):
    assert kaggle_data.find_kaggle_credentials() is None and kaggle_data.attached_dataset() is None
    with pytest.raises(CourseLibError, match="^no Kaggle data and no Kaggle token"):
        kaggle_data.download_kaggle(tmp_path / "k")
    r = run_cli("data", "kaggle", "--out", tmp_path / "k", env=no_kaggle_env, timeout=120)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(
        "course-lib: error: no Kaggle data and no Kaggle token"
    )
    assert not (tmp_path / "k").exists()


def test_the_token_is_found_where_kagglehub_looks(tmp_path, no_kaggle_env, monkeypatch):
    (tmp_path / ".kaggle").mkdir()
    (tmp_path / ".kaggle" / "kaggle.json").write_text('{"username": "u", "key": "k"}')
    assert kaggle_data.find_kaggle_credentials().username == "u"
    (tmp_path / ".kaggle" / "kaggle.json").write_text("{not json")
    with pytest.raises(CourseLibError, match="the Kaggle credentials cannot be read"):
        kaggle_data.find_kaggle_credentials()
    (tmp_path / ".kaggle" / "kaggle.json").unlink()
    monkeypatch.setenv("KAGGLE_API_TOKEN", "x")
    assert kaggle_data.find_kaggle_credentials().api_key == "x"


def test_a_data_set_attached_to_the_notebook_is_used_in_place(tmp_path, no_kaggle_env, offline, capsys):
    "No token, no kagglehub call, no network: the read-only mount is the data folder."
    attached = _kaggle_layout(tmp_path / "input" / SLUG)
    assert kaggle_data.attached_dataset() == attached and kaggle_data.attached_dataset(512) is None
    assert kaggle_data.download_kaggle(tmp_path / "elsewhere") == attached
    assert sources.get_data_dir() == attached
    assert "Using the Kaggle data attached to this notebook" in capsys.readouterr().out
    assert sources.get_data_dir(smoke=True) != attached, "smoke mode trains on the sample"
    assert not (tmp_path / "elsewhere").exists()


def test_a_data_set_mounted_one_level_down_is_found(tmp_path, no_kaggle_env, offline):
    "Kaggle's newer notebooks mount a data set under its owner's folder."
    attached = _kaggle_layout(tmp_path / "input" / "datasets" / "cdeotte" / SLUG)
    assert kaggle_data.attached_dataset() == attached


def test_in_a_kaggle_notebook_kagglehub_attaches_the_data_set(tmp_path, no_kaggle_env, monkeypatch, offline):
    """Not attached yet, in a Kaggle notebook without a token: kagglehub's notebook resolver asks Kaggle to
    attach it (here a stand-in that mounts it) and the course uses the mount."""
    import kagglehub.kaggle_cache_resolver as resolver

    monkeypatch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
    monkeypatch.setenv("KAGGLE_DATA_PROXY_URL", "http://kaggle-data-proxy.invalid")
    asked = []

    class AttachingClient:  # Kaggle's side of the notebook's JWT client
        def post(self, request, data, timeout=None):
            asked.append((request, data))
            _kaggle_layout(tmp_path / "input" / SLUG)
            return {"mountSlug": SLUG, "versionNumber": 1}

    monkeypatch.setattr(resolver, "KaggleJwtClient", AttachingClient)
    assert kaggle_data.find_kaggle_credentials() is None and kaggle_data.in_kaggle_notebook()
    assert sources.get_data_dir() == tmp_path / "input" / SLUG
    assert asked[0][1]["datasetRef"] == {"OwnerSlug": "cdeotte", "DatasetSlug": SLUG}


def test_with_a_token_kagglehubs_cache_serves_a_finished_download(
    tmp_path, no_kaggle_env, monkeypatch, offline
):
    "The version lookup is Kaggle's side; the cache and its completion marker are kagglehub's own."
    import kagglehub.http_resolver as http

    monkeypatch.setenv("KAGGLE_API_TOKEN", "x")
    monkeypatch.setattr(http, "_get_current_version", lambda client, handle: 3)
    cached = _kaggle_layout(tmp_path / "kagglehub" / "datasets" / "cdeotte" / SLUG / "versions" / "3")
    marker = tmp_path / "kagglehub" / "datasets" / "cdeotte" / SLUG / "3.complete"
    marker.touch()
    got = kaggle_data.download_kaggle()
    assert got == cached, (got, sorted(p.relative_to(tmp_path) for p in (tmp_path / "kagglehub").rglob("*")))


def _fake_download(monkeypatch, fail_after=None):
    "kagglehub.dataset_download writing the set into output_dir, or stopping half-way with an error."
    import kagglehub

    def download(handle, output_dir=None, force_download=False):
        out = _kaggle_layout(__import__("pathlib").Path(output_dir))
        (out / "train").mkdir()
        (out / "train" / "ISIC_1.jpg").write_bytes(b"jpeg")
        if fail_after:
            raise ConnectionError("the connection was reset")
        return str(out)

    monkeypatch.setattr(kagglehub, "dataset_download", download)


def test_a_named_folder_is_filled_only_when_the_whole_set_is_in(tmp_path, no_kaggle_env, monkeypatch):
    monkeypatch.setenv("KAGGLE_API_TOKEN", "x")
    _fake_download(monkeypatch, fail_after=True)
    with pytest.raises(
        CourseLibError, match=r"the Kaggle download of cdeotte/jpeg-melanoma-256x256 failed \("
    ):
        kaggle_data.download_kaggle(tmp_path / "data")
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".data.")]
    assert not left, f"the half-finished download is gone: {left}"
    assert not (tmp_path / "data").exists()
    _fake_download(monkeypatch)
    out = kaggle_data.download_kaggle(tmp_path / "data")
    assert (
        out == tmp_path / "data"
        and folder_kind(out) == "kaggle-256"
        and (out / "train" / "ISIC_1.jpg").exists()
    )
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".data.")], "no staging folder is left"
    assert kaggle_data.download_kaggle(tmp_path / "data") == out, "a finished download is not repeated"


def test_a_sample_set_or_a_learners_folder_is_not_filled(tmp_path, no_kaggle_env, monkeypatch):
    from course_lib.support.sample import make_sample_dataset

    monkeypatch.setenv("KAGGLE_API_TOKEN", "x")
    _fake_download(monkeypatch)
    sample_set = make_sample_dataset(tmp_path / "sample", n=5, img_size=32)
    with pytest.raises(CourseLibError, match="holds a sample folder, not a kaggle-256 one"):
        kaggle_data.download_kaggle(sample_set)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("a learner's notes")
    with pytest.raises(CourseLibError, match="files that course_lib did not write there"):
        kaggle_data.download_kaggle(mine)
    assert (mine / "notes.txt").read_text() == "a learner's notes" and not (mine / MARKER).exists()
