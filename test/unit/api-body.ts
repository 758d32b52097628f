/** A whole API response body as text; a streamed body (the bundle archive) is not one here. */
import { isStreamBody, type ApiResponse } from '../../collector/api-message';

export function bodyText(body: ApiResponse['body']): string {
  if (isStreamBody(body)) throw new Error('a streamed body where a whole one was expected');
  return body.toString();
}
