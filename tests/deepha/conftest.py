import pytest
import torch


@pytest.fixture(scope="session")
def tiny_demos():
    """Two bot demos each of PutNextLocal and Synth (training seeds), built here (not the user cache)."""
    from zoo.deepha.demos import generate

    return generate(["PutNextLocal", "Synth"], 2)


@pytest.fixture(scope="session")
def random_coa():
    """An untrained CoA module (fixed seed): enough to check caching, compression and determinism."""
    from zoo.deepha.module import DeepHAModule

    torch.manual_seed(0)
    return DeepHAModule(arm="coa", max_len=1024).eval()


@pytest.fixture(scope="session")
def random_coa_film():
    """The same, with the mission-conditioned (FiLM) OBS encoder."""
    from zoo.deepha.module import DeepHAModule

    torch.manual_seed(0)
    return DeepHAModule(arm="coa", max_len=1024, obs_encoder="film").eval()


@pytest.fixture(params=["mlp", "film"])
def coa_module(request):
    """``random_coa`` or ``random_coa_film``: tests of the agent's bookkeeping run with both OBS encoders."""
    return request.getfixturevalue("random_coa" if request.param == "mlp" else "random_coa_film")


@pytest.fixture(autouse=True)
def one_thread():
    """Single-token decoder calls are faster on one thread (and two threads thrash on a shared machine)."""
    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)
