"""An image (docs/images.md): the environment a remote function runs in, declared once.

A worker builds it the first time a call needs it there (installing the requirements as wheels
inside a sandboxed container, importing the listed modules, setting the variables) and keeps it
for the caller's tenant; later calls there start from it without installing anything. Below
:mod:`readie._options`, which carries it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, List, Mapping, Optional, Tuple

from readie._connection import ConnectionSettings, current_settings
from readie._proto import call_pb2, tenant_pb2
from readie._tenant_rpc import unary, unary_async

_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: The tenant service's method that lists the caller's images.
OWN_IMAGES_METHOD = "/readie.v1.TenantService/OwnImages"
_RESERVED = re.compile(r"^(READIE_|PYTHONPATH$|PYTHONHOME$|HOME$|TMPDIR$|PATH$)")


def _texts(value: Iterable[str], name: str) -> Tuple[str, ...]:
    if isinstance(value, (str, bytes)):
        raise TypeError(f"Image({name}=...) must be a list of strings, e.g. [{value!r}], not a string")
    items = tuple(value)
    for item in items:
        if not isinstance(item, str) or not item.strip():
            raise TypeError(f"Image({name}=...) must hold non-empty strings, not {item!r}")
    return items


@dataclass(frozen=True)
class ImageStatus:
    """Where one of your images is built: ``Image.status()`` lists one per worker that holds it."""

    #: The worker that holds it.
    worker_id: str
    #: How calls name it (``CallInfo.checkpoint_id``): ``image:`` and 16 hex digits.
    name: str
    #: Its identity, 64 hex digits.
    image_id: str
    #: Its size on disk, in bytes.
    bytes: int
    #: When a call last used it (or it was built), ISO-8601 UTC.
    last_used_at: str
    #: Calls using it now.
    in_use: int


def _statuses(answer: tenant_pb2.OwnImagesResponse) -> List[ImageStatus]:
    return [
        ImageStatus(
            worker_id=image.worker_id,
            name=image.name,
            image_id=image.image_id,
            bytes=int(image.bytes),
            last_used_at=image.last_used_at,
            in_use=int(image.in_use),
        )
        for image in answer.images
    ]


@dataclass(frozen=True)
class Image:
    """The environment a function runs in: ``@readie.remote(image=readie.Image(...))``.

    - ``packages``: PEP 508 requirements, resolved by the worker to wheels only (never an sdist)
      and installed once per worker and tenant;
    - ``imports``: modules imported once installed (a failed import fails the build, naming the
      module and its traceback), so a call starts with them loaded;
    - ``env``: environment variables set in every container of the image (not ``PATH``,
      ``HOME``, ``TMPDIR``, ``PYTHONPATH``, ``PYTHONHOME`` or ``READIE_*``).

    Its identity is the content hash of the wheels the requirements resolve to, the imports, the
    environment, the Python version and the worker's flavor; a worker never lends one tenant's
    image to another.
    """

    packages: Tuple[str, ...] = field(default=())
    imports: Tuple[str, ...] = field(default=())
    env: Tuple[Tuple[str, str], ...] = field(default=())

    def __init__(
        self,
        packages: Iterable[str] = (),
        imports: Iterable[str] = (),
        env: Optional[Mapping[str, str]] = None,
    ) -> None:
        modules = _texts(imports, "imports")
        for module in modules:
            if not _MODULE.match(module):
                raise ValueError(f"Image(imports=...): {module!r} is not a module name (numpy, torch.nn)")
        variables = dict(env or {})
        for name, value in variables.items():
            if not isinstance(name, str) or not _ENV_NAME.match(name):
                raise ValueError(f"Image(env=...): {name!r} is not a variable name")
            if _RESERVED.match(name):
                raise ValueError(f"Image(env=...): {name} belongs to the sandbox")
            if not isinstance(value, str):
                raise TypeError(f"Image(env=...): the value of {name} must be a string, not {value!r}")
        object.__setattr__(self, "packages", _texts(packages, "packages"))
        object.__setattr__(self, "imports", modules)
        object.__setattr__(self, "env", tuple(sorted(variables.items())))

    @staticmethod
    def of_packages(packages: Iterable[str]) -> "Image":
        """The image of one step: ``packages`` installed, nothing imported."""
        return Image(packages=packages)

    def _request(self) -> tenant_pb2.OwnImagesRequest:
        spec = call_pb2.ImageSpec(packages=list(self.packages), imports=list(self.imports))
        for name, value in self.env:
            spec.env[name] = value
        return tenant_pb2.OwnImagesRequest(image=spec)

    def status(self, settings: Optional[ConnectionSettings] = None) -> List[ImageStatus]:
        """Where this image is built for your tenant: one entry per worker that is up and holds it
        (none before a call has built it), with its size and last use. The router asks the
        workers; you never see another tenant's image."""
        answer = unary(
            settings or current_settings(),
            OWN_IMAGES_METHOD,
            self._request(),
            tenant_pb2.OwnImagesRequest.SerializeToString,
            tenant_pb2.OwnImagesResponse.FromString,
        )
        return _statuses(answer)

    async def status_async(self, settings: Optional[ConnectionSettings] = None) -> List[ImageStatus]:
        """:meth:`status` for asyncio."""
        answer = await unary_async(
            settings or current_settings(),
            OWN_IMAGES_METHOD,
            self._request(),
            tenant_pb2.OwnImagesRequest.SerializeToString,
            tenant_pb2.OwnImagesResponse.FromString,
        )
        return _statuses(answer)

    def __repr__(self) -> str:
        return f"Image(packages={list(self.packages)!r}, imports={list(self.imports)!r}, env={dict(self.env)!r})"
