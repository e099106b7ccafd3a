-- Every page view and track call of a visitor (signed in or not), the raw material of sessions.
select
    id as event_id,
    coalesce(user_id, anonymous_id) as visitor_id,
    user_id,
    'page' as kind,
    cast(null as string) as event,
    timestamp as event_at
from {{ source('segment', 'pages') }}
where coalesce(user_id, anonymous_id) is not null
union all
select
    id as event_id,
    coalesce(user_id, anonymous_id) as visitor_id,
    user_id,
    'track' as kind,
    event,
    timestamp as event_at
from {{ source('segment', 'tracks') }}
where coalesce(user_id, anonymous_id) is not null
