"""Django spools an uploaded file of any size to a temporary file before a view sees it. This
handler, first in FILE_UPLOAD_HANDLERS, stops passing a file's bytes on once it is past
ATTACHMENT_MAX_BYTES: the rest is counted, not kept, and the view receives a file that only
knows its size — which `prepare` refuses with the limit named. Disk use per file is bounded."""

from __future__ import annotations

from django.conf import settings
from django.core.files.uploadedfile import UploadedFile
from django.core.files.uploadhandler import FileUploadHandler


class OversizedUpload(UploadedFile):
    """A file past the limit: its name and size, no content."""

    def __init__(self, name: str, content_type: str, size: int):
        super().__init__(file=None, name=name, content_type=content_type, size=size)

    def read(self, *args, **kwargs) -> bytes:
        return b""

    def seek(self, *args, **kwargs) -> int:
        return 0


class CappedUploadHandler(FileUploadHandler):
    def new_file(self, *args, **kwargs):
        super().new_file(*args, **kwargs)
        self.seen, self.over = 0, False

    def receive_data_chunk(self, raw_data, start):
        self.seen += len(raw_data)
        if self.seen > settings.ATTACHMENT_MAX_BYTES:
            self.over = True
            return None  # the handlers after this one never get it
        return raw_data

    def file_complete(self, file_size):
        if self.over:
            return OversizedUpload(self.file_name, self.content_type, self.seen)
        return None  # the next handler (memory or temporary file) has the whole file
