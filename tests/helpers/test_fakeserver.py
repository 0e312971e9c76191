import json
import urllib.request

from tests.helpers.fakeserver import FakeOpenAIServer, Reply, scripted


def _post(url: str, body: dict) -> tuple[int, bytes]:
    request = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def test_scripted_replies_and_recorded_requests():
    with FakeOpenAIServer(scripted([Reply(status=429, headers={"Retry-After": "1"}), "hello"])) as server:
        status, _ = _post(server.url, {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert status == 429
        status, body = _post(server.url, {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert status == 200
        assert json.loads(body)["choices"][0]["message"]["content"] == "hello"
        assert server.request_count == 2
        assert server.requests[0]["messages"][0]["content"] == "hi"
