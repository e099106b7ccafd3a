-- Daily active users: signed-in users with at least one page view or track call that day (UTC).
select
    cast(event_at as date) as day,
    count(distinct user_id) as active_users
from {{ ref('events') }}
where user_id is not null
group by cast(event_at as date)
